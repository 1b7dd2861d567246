package sql

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

func TestParseConnectArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		driver string
		args   map[string]any
		want   connectArgs
	}{
		{"loopback defaults to plain text", driverPostgres,
			map[string]any{"host": "127.0.0.1", "user": "reader", "database": "records"},
			connectArgs{host: "127.0.0.1", port: 5432, user: "reader", database: "records", tlsMode: tlsDisable, timeout: defaultConnectTimeout}},
		{"a remote host defaults to verify-full", driverPostgres,
			map[string]any{"host": "db.example.com", "user": "reader", "dbname": "records"},
			connectArgs{host: "db.example.com", port: 5432, user: "reader", database: "records", tlsMode: tlsVerifyFull, timeout: defaultConnectTimeout}},
		{"mysql port, db alias, port as text, tls alias", driverMySQL,
			map[string]any{"host": "localhost", "port": "3307", "user": "reader", "db": "lending", "tls": "require", "connect_timeout": json.Number("3")},
			connectArgs{host: "localhost", port: 3307, user: "reader", database: "lending", tlsMode: tlsRequire, timeout: 3 * time.Second}},
		{"mysql default port, database optional", driverMySQL,
			map[string]any{"host": "::1", "user": "reader"},
			connectArgs{host: "::1", port: 3306, user: "reader", tlsMode: tlsDisable, timeout: defaultConnectTimeout}},
		{"unix socket", driverPostgres,
			map[string]any{"unix_socket": "/run/postgresql/", "user": "reader", "database": "records", "port": json.Number("5433")},
			connectArgs{socket: "/run/postgresql", port: 5433, user: "reader", database: "records", tlsMode: tlsDisable, timeout: defaultConnectTimeout}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseConnectArgs(tt.args, tt.driver)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(connectArgs{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseConnectArgsRefusals(t *testing.T) {
	t.Parallel()
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"host": "127.0.0.1", "user": "reader", "database": "records"}
		for k, v := range extra {
			if v == nil {
				delete(m, k)
				continue
			}
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name     string
		args     map[string]any
		wantPath string
		wantMsg  string
	}{
		{"password in the deployment", base(map[string]any{"password": "hunter2"}), "sql_connect_args.password", "sql_password_env"},
		{"passwd in the deployment", base(map[string]any{"passwd": "hunter2"}), "sql_connect_args.passwd", "sql_password_env"},
		{"unknown argument", base(map[string]any{"charset": "utf8"}), "sql_connect_args.charset", "unknown connection argument"},
		{"two names for one argument", base(map[string]any{"dbname": "other"}), "sql_connect_args.dbname", "already sets"},
		{"port out of range", base(map[string]any{"port": json.Number("70000")}), "sql_connect_args.port", "1 to 65535"},
		{"port not a number", base(map[string]any{"port": "fifty"}), "sql_connect_args.port", "1 to 65535"},
		{"unknown TLS mode", base(map[string]any{"sslmode": "prefer"}), "sql_connect_args.sslmode", `"prefer" is not a TLS mode`},
		{"host and socket", base(map[string]any{"unix_socket": "/run/x"}), "sql_connect_args.unix_socket", "not both"},
		{"relative socket", base(map[string]any{"host": nil, "unix_socket": "run/x"}), "sql_connect_args.unix_socket", "absolute"},
		{"TLS over a socket", base(map[string]any{"host": nil, "unix_socket": "/run/x", "sslmode": "require"}), "sql_connect_args.sslmode", "unix socket"},
		{"CA without verify-full", base(map[string]any{"sslmode": "require", "sslrootcert": "/ca.pem"}), "sql_connect_args.sslrootcert", "verify-full"},
		{"no host", base(map[string]any{"host": nil}), "sql_connect_args.host", "needs host"},
		{"no user", base(map[string]any{"user": nil}), "sql_connect_args.user", "missing"},
		{"no database on postgres", base(map[string]any{"database": nil}), "sql_connect_args.database", "missing"},
		{"empty host", base(map[string]any{"host": " "}), "sql_connect_args.host", "non-empty string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseConnectArgs(tt.args, driverPostgres)
			var ce *refusal.Error
			if !errors.As(err, &ce) || ce.Path != tt.wantPath || !strings.Contains(ce.Message, tt.wantMsg) {
				t.Errorf("parseConnectArgs = %v; want path %s and a message containing %q", err, tt.wantPath, tt.wantMsg)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the refusal repeats the password: %v", err)
			}
		})
	}
}

// TestConfigureServerDrivers configures the server drivers without a
// server: Configure never connects.
func TestConfigureServerDrivers(t *testing.T) {
	t.Parallel()
	section := func(driver string) map[string]any {
		return map[string]any{
			"sql_driver":       driver,
			"sql_query":        "SELECT id FROM encounters WHERE patient_id = %(p)s AND type = :t",
			"sql_query_params": map[string]any{"p": map[string]any{"param": "patient_id"}, "t": "Triage"},
			"sql_connect_args": map[string]any{"host": "127.0.0.1", "port": 1, "user": "reader", "database": "records"},
			"sql_password_env": "DB_PASSWORD",
		}
	}
	for _, tt := range []struct {
		driver    string
		wantQuery string
	}{
		{"postgres", "SELECT id FROM encounters WHERE patient_id = $1 AND type = $2"},
		{"postgresql", "SELECT id FROM encounters WHERE patient_id = $1 AND type = $2"},
		{"mysql", "SELECT id FROM encounters WHERE patient_id = ? AND type = ?"},
		{"mariadb", "SELECT id FROM encounters WHERE patient_id = ? AND type = ?"},
		{"pymysql", "SELECT id FROM encounters WHERE patient_id = ? AND type = ?"},
	} {
		t.Run(tt.driver, func(t *testing.T) {
			t.Parallel()
			a := New().(*Adapter)
			err := a.Configure(t.Context(), sdk.ConfigureRequest{Config: configJSON(t, section(tt.driver)),
				Secrets: map[string]string{passwordSlot: "pw"}})
			if err != nil {
				t.Fatal(err)
			}
			s, _ := a.Load()
			defer s.reader.close()
			params := map[string]string{"patient_id": "p-1"}
			args, err := bindParams(s.values, s.names, params)
			if s.query != tt.wantQuery || err != nil || !cmp.Equal(args, []any{"p-1", "Triage"}) {
				t.Errorf("query %q args %v, %v", s.query, args, err)
			}
			// Port 1 refuses connections: the captures are unreachable,
			// with a reason; nothing is an error.
			res, err := a.TestConnection(t.Context(), sdk.TestRequest{Params: params})
			if err != nil || res.Reachable || !strings.Contains(res.Message, "cannot read") {
				t.Errorf("TestConnection = %+v, %v", res, err)
			}
			req := captureReq(5 * time.Second)
			req.Params = params
			capt, err := a.CaptureAfter(t.Context(), req)
			if err != nil || capt.Reachable || !strings.Contains(capt.Reason, "127.0.0.1:1") {
				t.Errorf("CaptureAfter = %+v, %v", capt, err)
			}
		})
	}
	t.Run("password variable without a value", func(t *testing.T) {
		t.Parallel()
		err := New().Configure(t.Context(), sdk.ConfigureRequest{Config: configJSON(t, section("postgres"))})
		var ce *refusal.Error
		if !errors.As(err, &ce) || ce.Path != "sql_password_env" || !strings.Contains(ce.Message, "DB_PASSWORD") {
			t.Errorf("Configure = %v", err)
		}
	})
	t.Run("mysql reading of dollar signs", func(t *testing.T) {
		t.Parallel()
		s := section("mysql")
		s["sql_query"] = "SELECT $$; DELETE FROM t; $$"
		delete(s, "sql_query_params")
		err := New().Configure(t.Context(), sdk.ConfigureRequest{Config: configJSON(t, s), Secrets: map[string]string{passwordSlot: "pw"}})
		var ce *refusal.Error
		if !errors.As(err, &ce) || ce.Path != "sql_query" || !strings.Contains(ce.Message, "DELETE") {
			t.Errorf("Configure = %v; want the filter to refuse DELETE, code to MySQL", err)
		}
	})
}

func TestStatementTimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	limit, ok := statementTimeout(ctx)
	if !ok || limit < 9*time.Second || limit > 10*time.Second-400*time.Millisecond {
		t.Errorf("10s deadline: limit %v, ok %v", limit, ok)
	}
	short, cancel2 := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel2()
	if limit, ok := statementTimeout(short); !ok || limit > 81*time.Millisecond || limit < 50*time.Millisecond {
		t.Errorf("100ms deadline: limit %v, ok %v", limit, ok)
	}
	if limit, ok := statementTimeout(t.Context()); !ok || limit != 0 {
		t.Errorf("no deadline: limit %v, ok %v; want no limit", limit, ok)
	}
	gone, cancel3 := context.WithTimeout(t.Context(), -time.Second)
	defer cancel3()
	if _, ok := statementTimeout(gone); ok {
		t.Error("a passed deadline leaves time")
	}
}
