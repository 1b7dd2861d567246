package sql

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/verifierd/verifierd/sdk/refusal"
)

// TLS modes of sql_connect_args.sslmode (alias tls).
const (
	tlsDisable    = "disable"
	tlsRequire    = "require"
	tlsVerifyFull = "verify-full"
)

// connectArgs is sql_connect_args resolved for a server driver.
type connectArgs struct {
	host     string
	port     int
	user     string
	database string
	// socket is a unix socket: for postgres the folder holding the
	// server's .s.PGSQL.<port> socket (as libpq's host=/folder), for mysql
	// the socket file itself.
	socket   string
	tlsMode  string
	rootCert string // PEM file of the CA that signs the server certificate
	timeout  time.Duration
}

// connectArgNames maps what operators write (including the names the
// Python DB-API drivers use) to the argument it sets.
var connectArgNames = map[string]string{
	"host": "host", "port": "port",
	"user": "user", "username": "user",
	"database": "database", "dbname": "database", "db": "database",
	"sslmode": "sslmode", "tls": "sslmode", "ssl_mode": "sslmode",
	"sslrootcert": "sslrootcert", "ssl_ca": "sslrootcert",
	"unix_socket":     "unix_socket",
	"connect_timeout": "connect_timeout",
}

const connectArgList = "host, port, user, database, sslmode (disable, require, verify-full), sslrootcert, unix_socket, connect_timeout"

const defaultConnectTimeout = 10 * time.Second

// parseConnectArgs reads sql_connect_args for driver. It refuses unknown
// keys and, above all, a password written into the deployment.
func parseConnectArgs(raw map[string]any, driver string) (connectArgs, error) {
	a := connectArgs{timeout: defaultConnectTimeout}
	seen := map[string]string{}
	for _, key := range slices.Sorted(maps.Keys(raw)) {
		path := "sql_connect_args." + key
		lower := strings.ToLower(key)
		if lower == "password" || lower == "passwd" || strings.Contains(lower, "password") {
			return a, &refusal.Error{Path: path, Message: "a password never goes in the deployment; put the NAME of the environment variable that holds it in sql_password_env"}
		}
		name, ok := connectArgNames[lower]
		if !ok {
			return a, &refusal.Error{Path: path, Message: "unknown connection argument; the arguments are " + connectArgList}
		}
		if other, dup := seen[name]; dup {
			return a, &refusal.Error{Path: path, Message: fmt.Sprintf("sets %s, which %s already sets; keep one", name, other)}
		}
		seen[name] = key
		v := raw[key]
		switch name {
		case "port":
			n, err := argInt(v)
			if err != nil || n < 1 || n > 65535 {
				return a, &refusal.Error{Path: path, Message: "a TCP port is a number from 1 to 65535"}
			}
			a.port = n
		case "connect_timeout":
			n, err := argInt(v)
			if err != nil || n < 1 || n > 600 {
				return a, &refusal.Error{Path: path, Message: "seconds to wait for a connection, from 1 to 600"}
			}
			a.timeout = time.Duration(n) * time.Second
		default:
			s, ok := v.(string)
			if !ok || strings.TrimSpace(s) == "" {
				return a, &refusal.Error{Path: path, Message: "write a non-empty string"}
			}
			switch name {
			case "host":
				a.host = s
			case "user":
				a.user = s
			case "database":
				a.database = s
			case "sslmode":
				a.tlsMode = strings.ToLower(s)
				if a.tlsMode != tlsDisable && a.tlsMode != tlsRequire && a.tlsMode != tlsVerifyFull {
					return a, &refusal.Error{Path: path, Message: fmt.Sprintf("%q is not a TLS mode; write disable, require (encrypted, server not verified) or verify-full (encrypted, certificate and host name verified)", s)}
				}
			case "sslrootcert":
				a.rootCert = s
			case "unix_socket":
				if !filepath.IsAbs(s) {
					return a, &refusal.Error{Path: path, Message: "write the socket's absolute path"}
				}
				a.socket = filepath.Clean(s)
			}
		}
	}
	if a.host == "" && a.socket == "" {
		return a, &refusal.Error{Path: "sql_connect_args.host", Message: fmt.Sprintf("missing: the %s driver needs host (and port) or unix_socket", driver)}
	}
	if a.host != "" && a.socket != "" {
		return a, &refusal.Error{Path: "sql_connect_args.unix_socket", Message: "write host or unix_socket, not both"}
	}
	if a.user == "" {
		return a, &refusal.Error{Path: "sql_connect_args.user", Message: "missing: name the database role the adapter logs in as (a read-only one)"}
	}
	if driver == driverPostgres && a.database == "" {
		return a, &refusal.Error{Path: "sql_connect_args.database", Message: "missing: name the database to read"}
	}
	if a.port == 0 {
		a.port = 5432
		if driver == driverMySQL {
			a.port = 3306
		}
	}
	if a.socket != "" {
		if a.tlsMode != "" && a.tlsMode != tlsDisable {
			return a, &refusal.Error{Path: "sql_connect_args.sslmode", Message: "TLS does not apply to a unix socket; remove sslmode or write disable"}
		}
		a.tlsMode = tlsDisable
	}
	if a.tlsMode == "" {
		// Plain text only where it never leaves the machine.
		a.tlsMode = tlsVerifyFull
		if isLoopback(a.host) {
			a.tlsMode = tlsDisable
		}
	}
	if a.rootCert != "" && a.tlsMode != tlsVerifyFull {
		return a, &refusal.Error{Path: "sql_connect_args.sslrootcert", Message: "the CA certificate is only used with sslmode: verify-full"}
	}
	return a, nil
}

func argInt(v any) (int, error) {
	switch x := v.(type) {
	case json.Number:
		return strconv.Atoi(x.String())
	case float64:
		if x != float64(int(x)) {
			return 0, fmt.Errorf("not an integer")
		}
		return int(x), nil
	case string:
		return strconv.Atoi(x)
	}
	return 0, fmt.Errorf("not a number")
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tlsConfig is the client TLS configuration for the mode, or nil when TLS
// is off.
func (a connectArgs) tlsConfig() (*tls.Config, error) {
	switch a.tlsMode {
	case tlsRequire:
		// Encrypted, server not verified: what require means to libpq.
		return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, nil
	case tlsVerifyFull:
		c := &tls.Config{ServerName: a.host, MinVersion: tls.VersionTLS12}
		if a.rootCert != "" {
			pem, err := os.ReadFile(a.rootCert)
			if err != nil {
				return nil, &refusal.Error{Path: "sql_connect_args.sslrootcert", Message: fmt.Sprintf("cannot read the CA certificate: %v", err)}
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, &refusal.Error{Path: "sql_connect_args.sslrootcert", Message: a.rootCert + " holds no PEM certificate"}
			}
			c.RootCAs = pool
		}
		return c, nil
	}
	return nil, nil
}

// describe names the database for messages and logs: driver, user, where,
// database and TLS mode. It never includes the password.
func (a connectArgs) describe(driver string) string {
	where := net.JoinHostPort(a.host, strconv.Itoa(a.port))
	if a.socket != "" {
		where = a.socket
	}
	db := ""
	if a.database != "" {
		db = "/" + a.database
	}
	return fmt.Sprintf("%s %s@%s%s", driver, a.user, where, db)
}
