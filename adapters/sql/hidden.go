package sql

import (
	"context"
	stdsql "database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/verifierd/verifierd/sdk"
)

// A read through a view, or through a table under row-level security that
// applies to the login, can leave rows out that the login is not shown: a
// duplicate saved as a draft, or under another owner, is then invisible,
// and a count "exactly one" would be confirmed over it. The daemon cannot
// see what such a filter keeps, so the adapter does not judge through it:
// every read fails (unusable, naming the view or the table) unless the
// operator, after review, declares `sql_hidden_rows: accepted` (the login
// sees every row the contract is about). SQLite has no logins; its file
// is read whole.

// hiddenAccepted is the one value sql_hidden_rows takes.
const hiddenAccepted = "accepted"

// hiddenRows is what a reader found of the filters a query reads through:
// "" when none, else e.g. `the view "adv_visible"` (checked once per
// configuration, again after an error).
type hiddenRows struct {
	mu      sync.Mutex
	checked bool
	why     string
}

// relationNames are the names a query may read from: every bare word
// (lower-cased: unquoted names fold) and quoted name of its text.
func relationNames(query string, d dialect) []string {
	toks, lerr := lex(query, d)
	if lerr != nil {
		return nil
	}
	var out []string
	for _, t := range toks {
		var n string
		switch t.kind {
		case tokWord:
			n = strings.ToLower(t.text)
		case tokQuotedIdent:
			n = strings.Trim(t.text, "\"`[]")
		default:
			continue
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// hiddenReason is the unusable read's reason for a read through why.
func hiddenReason(why string) sdk.Capture {
	return sdk.Unreachable("the query reads through %s, which can leave out rows this login is not shown: a duplicate it hides would be invisible, so the read is not judged; "+
		"read the base table with a login that sees every row the contract is about, or, once reviewed, declare sql_hidden_rows: %s", why, hiddenAccepted)
}

// hiddenFilter answers whether s's query reads through a row filter, asking the
// database once per configuration (an error is not remembered).
func (s *settings) hiddenFilter(ctx context.Context) (string, error) {
	if s.hiddenOK {
		return "", nil
	}
	s.hidden.mu.Lock()
	defer s.hidden.mu.Unlock()
	if s.hidden.checked {
		return s.hidden.why, nil
	}
	why, err := s.reader.rowFilters(ctx, relationNames(s.query, driverDialect(s.driver)))
	if err != nil {
		return "", err
	}
	s.hidden.checked, s.hidden.why = true, why
	return why, nil
}

// rowFilters (PostgreSQL): a view or materialized view among names, or a
// table whose row-level security applies to the login (enabled, the login
// neither a superuser nor BYPASSRLS, and not its owner unless FORCEd). The
// system catalogs' views (pg_stat_activity, information_schema) describe
// the server, not records, and are not counted.
func (r *pgReader) rowFilters(ctx context.Context, names []string) (string, error) {
	conn, tx, err := r.begin(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return "", err
	}
	defer r.end(ctx, conn, tx)
	rows, err := tx.Query(ctx, `SELECT c.relname, c.relkind IN ('v', 'm'),
			c.relrowsecurity AND NOT r.bypass AND (NOT pg_has_role(c.relowner, 'USAGE') OR c.relforcerowsecurity)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
			(SELECT rolbypassrls OR rolsuper AS bypass FROM pg_roles WHERE rolname = current_user) r
		WHERE c.relname = ANY($1) AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND pg_table_is_visible(c.oid)
			AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		ORDER BY c.relname`, names)
	if err != nil {
		return "", classifyPG(ctx, err, false)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var view, rls bool
		if err := rows.Scan(&name, &view, &rls); err != nil {
			return "", err
		}
		switch {
		case view:
			return fmt.Sprintf("the view %q", name), nil
		case rls:
			return fmt.Sprintf("row-level security on the table %q", name), nil
		}
	}
	return "", classifyPG(ctx, rows.Err(), false)
}

// rowFilters (MySQL, MariaDB): a view among names (they have no row-level
// security).
func (r *mysqlReader) rowFilters(ctx context.Context, names []string) (string, error) {
	if len(names) == 0 {
		return "", nil
	}
	conn, tx, err := r.begin(ctx, &stdsql.TxOptions{ReadOnly: true})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	defer tx.Rollback() //nolint:errcheck // a read-only look-up: nothing to keep
	q := "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'VIEW' AND LOWER(TABLE_NAME) IN (?" + strings.Repeat(", ?", len(names)-1) + ") ORDER BY TABLE_NAME LIMIT 1"
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = strings.ToLower(n)
	}
	var name string
	switch err := tx.QueryRowContext(ctx, q, args...).Scan(&name); {
	case err == nil:
		return fmt.Sprintf("the view %q", name), nil
	case strings.Contains(err.Error(), "no rows"):
		return "", nil
	default:
		return "", classifyMySQL(ctx, err, false)
	}
}

// rowFilters (SQLite): none; the file is read whole by whoever can open it.
func (r *sqliteReader) rowFilters(context.Context, []string) (string, error) { return "", nil }
