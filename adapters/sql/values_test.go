package sql

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// The value conversions, one by one, for the types the real servers in
// TestServerValues cannot show (MySQL's JSON type) and for malformed input.

func TestMySQLConversions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		conv func(any) any
		in   any
		want any
	}{
		{"null", mysqlInteger, nil, nil},
		{"integer text", mysqlInteger, []byte("-42"), json.Number("-42")},
		{"integer binary", mysqlInteger, int64(7), json.Number("7")},
		{"unsigned above int64", mysqlInteger, []byte("18446744073709551615"), json.Number("18446744073709551615")},
		{"unsigned binary", mysqlInteger, uint64(18446744073709551615), json.Number("18446744073709551615")},
		{"not an integer stays text", mysqlInteger, []byte("12abc"), "12abc"},
		{"float text, single precision", mysqlFloat(32), []byte("1.1"), json.Number("1.1")},
		{"float binary, single precision", mysqlFloat(32), float32(1.1), json.Number("1.1")},
		{"double", mysqlFloat(64), float64(0.1), json.Number("0.1")},
		{"decimal stays exact text", mysqlText, []byte("10.50"), "10.50"},
		{"bit", mysqlBit, []byte{0x02, 0x01}, json.Number("513")},
		{"datetime", mysqlDateTime, []byte("2024-05-01 10:20:30.500000"), "2024-05-01T10:20:30.5Z"},
		{"zero date stays as spelt", mysqlDateTime, []byte("0000-00-00 00:00:00"), "0000-00-00 00:00:00"},
		{"MySQL JSON nests", mysqlJSON, []byte(`{"a": 1.10, "b": [true, null]}`), json.RawMessage(`{"a": 1.10, "b": [true, null]}`)},
		{"JSON that does not parse stays text", mysqlJSON, []byte(`{"a":`), `{"a":`},
		{"blob", mysqlBytes, []byte{0, 1, 0xfe, 0xff}, "AAH+/w=="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, tt.conv(tt.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPostgresDecoders(t *testing.T) {
	t.Parallel()
	bin, text := int16(pgx.BinaryFormatCode), int16(pgx.TextFormatCode)
	tests := []struct {
		name    string
		oid     uint32
		format  int16
		in      []byte
		want    any
		wantErr bool
	}{
		{"int4", pgtype.Int4OID, bin, []byte{0xff, 0xff, 0xff, 0xfe}, json.Number("-2"), false},
		{"int8 of the wrong length", pgtype.Int8OID, bin, []byte{1, 2, 3}, nil, true},
		{"timestamptz before 2000", pgtype.TimestamptzOID, bin, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "1999-12-31T23:59:59.999999Z", false},
		{"date", pgtype.DateOID, bin, []byte{0, 0, 0, 1}, "2000-01-02", false},
		{"float4 shortest", pgtype.Float4OID, bin, []byte{0x3f, 0x8c, 0xcc, 0xcd}, json.Number("1.1"), false},
		{"numeric text is exact", pgtype.NumericOID, text, []byte("10.50"), "10.50", false},
		{"jsonb nests", pgtype.JSONBOID, text, []byte(`{"n": 1e400}`), json.RawMessage(`{"n": 1e400}`), false},
		{"uuid text", pgtype.UUIDOID, text, []byte("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", false},
		{"bool text", pgtype.BoolOID, text, []byte("t"), true, false},
		{"bytea text", pgtype.ByteaOID, text, []byte(`\x00ff`), "AP8=", false},
		{"an unknown type's text", 999999, text, []byte("(1,2)"), "(1,2)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := pgDecoderFor(tt.oid, tt.format)(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestGrantWrites(t *testing.T) {
	t.Parallel()
	tests := []struct {
		grant string
		want  bool
	}{
		{"GRANT USAGE ON *.* TO `reader`@`%` IDENTIFIED BY PASSWORD '*ABC'", false},
		{"GRANT SELECT ON `records`.* TO `reader`@`%`", false},
		{"GRANT SELECT, SHOW VIEW ON `records`.`insert_log` TO `reader`@`%`", false},
		{"GRANT SELECT, INSERT ON `records`.`t` TO `w`@`%`", true},
		{"GRANT ALL PRIVILEGES ON *.* TO `admin`@`%` WITH GRANT OPTION", true},
		{"GRANT SELECT (id, note), UPDATE (note) ON `records`.`t` TO `w`@`%`", true},
		{"GRANT SELECT (`update`, `delete`) ON `records`.`t` TO `r`@`%`", false},
		{"GRANT DELETE HISTORY ON `records`.* TO `w`@`%`", true},
		{"GRANT `app_role` TO `reader`@`%`", false},
		{"GRANT CREATE TEMPORARY TABLES ON `records`.* TO `r`@`%`", false},
	}
	for _, tt := range tests {
		if got := grantWrites(tt.grant); got != tt.want {
			t.Errorf("grantWrites(%q) = %v, want %v", tt.grant, got, tt.want)
		}
	}
}

// TestClassifyErrors: what each server says when it stops a query at its
// statement timeout, refuses a login, or goes away, and how the adapter
// reports it.
func TestClassifyErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var te *timeoutError
	var ce *connectError
	pgTimeout := &pgconn.PgError{Severity: "ERROR", Code: "57014", Message: "canceling statement due to statement timeout"}
	if err := classifyPG(ctx, pgTimeout, false); !errors.As(err, &te) {
		t.Errorf("postgres statement timeout: %T %v", err, err)
	}
	if err := classifyPG(ctx, &pgconn.PgError{Code: "57014", Message: "canceling statement due to user request"}, false); errors.As(err, &te) {
		t.Errorf("a cancel request is not the statement timeout: %v", err)
	}
	for _, code := range []string{"28P01", "08006", "57P01", "3D000"} {
		if err := classifyPG(ctx, &pgconn.PgError{Code: code}, false); !errors.As(err, &ce) {
			t.Errorf("postgres %s: %T, want a connection error", code, err)
		}
	}
	if err := classifyPG(ctx, &pgconn.PgError{Code: "42P01", Message: "relation does not exist"}, false); errors.As(err, &ce) || errors.As(err, &te) {
		t.Errorf("a missing table is a query error: %T", err)
	}
	for _, n := range []uint16{erMariaDBStmtTime, erMySQLExecTimeout} {
		if err := classifyMySQL(ctx, &mysql.MySQLError{Number: n}, false); !errors.As(err, &te) {
			t.Errorf("mysql %d: %T, want the statement timeout", n, err)
		}
	}
	for _, n := range []uint16{erAccessDenied, erBadDB, erServerShutdown} {
		if err := classifyMySQL(ctx, &mysql.MySQLError{Number: n}, false); !errors.As(err, &ce) {
			t.Errorf("mysql %d: %T, want a connection error", n, err)
		}
	}
	if err := classifyMySQL(ctx, &mysql.MySQLError{Number: erReadOnlyTx}, false); errors.As(err, &ce) || errors.As(err, &te) {
		t.Errorf("a write refused by the read-only transaction is a query error: %T", err)
	}
	if got := unreachableReason(ctx, "postgres r@h:1/d", &timeoutError{err: pgTimeout}); !strings.Contains(got, "statement timeout") {
		t.Errorf("reason %q", got)
	}
}
