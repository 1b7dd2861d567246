package changes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The operator's side of the PostgreSQL source (verifyctl changes
// setup|status|drop): the slot and publication are created only by setup,
// never silently by the daemon.

// quoteTable quotes a declared table ("t" or "schema.t") as an identifier.
func quoteTable(t string) string {
	return pgx.Identifier(strings.Split(t, ".")).Sanitize()
}

// SetupStatements are what setup runs, as an owner of the tables: the
// publication of the declared tables, REPLICA IDENTITY FULL on each (so
// updates and deletes carry their before images) and the slot.
func SetupStatements(n Names, tables []string) []string {
	quoted := make([]string, len(tables))
	for i, t := range tables {
		quoted[i] = quoteTable(t)
	}
	out := []string{fmt.Sprintf("CREATE PUBLICATION %s FOR TABLE %s", pgx.Identifier{n.Publication}.Sanitize(), strings.Join(quoted, ", "))}
	for _, q := range quoted {
		out = append(out, fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY FULL", q))
	}
	return append(out, fmt.Sprintf("SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", n.Slot))
}

// Grants are the statements the daemon's change-log login needs: the
// REPLICATION attribute, which pg_logical_slot_peek_binary_changes and
// pg_replication_slot_advance require.
func Grants(login string) []string {
	return []string{fmt.Sprintf("ALTER ROLE %s WITH REPLICATION", pgx.Identifier{login}.Sanitize())}
}

// Setup runs SetupStatements on conn, in order; it stops at the first
// refusal and says which statement failed.
func Setup(ctx context.Context, conn *pgx.Conn, n Names, tables []string) error {
	if len(tables) == 0 {
		return fmt.Errorf("changes.tables is empty: declare the tables whose committed changes are read")
	}
	for _, stmt := range SetupStatements(n, tables) {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w (setup runs as an owner of the tables with the REPLICATION attribute)", stmt, err)
		}
	}
	return nil
}

// Drop removes the slot and the publication (each only when present).
func Drop(ctx context.Context, conn *pgx.Conn, n Names) error {
	stmts := []string{
		"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '" + n.Slot + "'",
		"DROP PUBLICATION IF EXISTS " + pgx.Identifier{n.Publication}.Sanitize(),
	}
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// SlotStatus is the state of a deployment's slot.
type SlotStatus struct {
	Exists bool `json:"exists"`
	// Active is true while a connection streams from the slot.
	Active bool `json:"active"`
	// Confirmed is the oldest position the slot still holds changes from
	// (confirmed_flush_lsn); Current is pg_current_wal_lsn().
	Confirmed Position `json:"confirmed_position"`
	Current   Position `json:"current_position"`
	// LagBytes is Current - Confirmed; RetainedBytes is the WAL the slot
	// keeps on disk (Current - restart_lsn).
	LagBytes      int64 `json:"lag_bytes"`
	RetainedBytes int64 `json:"retained_bytes"`
}

// Status reads the slot's state.
func Status(ctx context.Context, conn *pgx.Conn, n Names) (SlotStatus, error) {
	s := SlotStatus{}
	err := conn.QueryRow(ctx, `SELECT active, coalesce(confirmed_flush_lsn::text, ''), pg_current_wal_lsn()::text,
  coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint,
  coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint
FROM pg_replication_slots WHERE slot_name = $1`, n.Slot).Scan(&s.Active, &s.Confirmed, &s.Current, &s.LagBytes, &s.RetainedBytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, nil
	}
	s.Exists = err == nil
	return s, err
}

// Preflight checks that the log is reachable and configured for the
// source, and returns one line per problem, each naming its fix.
func Preflight(ctx context.Context, conn *pgx.Conn, n Names, tables []string) []string {
	var walLevel, login string
	var slots int
	var replication bool
	err := conn.QueryRow(ctx, `SELECT current_setting('wal_level'), current_setting('max_replication_slots')::int,
  current_user, (SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user)`).Scan(&walLevel, &slots, &login, &replication)
	if err != nil {
		return []string{"the change log cannot be read: " + err.Error()}
	}
	var out []string
	if walLevel != "logical" {
		out = append(out, fmt.Sprintf("wal_level is %s; set wal_level = logical in postgresql.conf and restart the server", walLevel))
	}
	if slots < 1 {
		out = append(out, "max_replication_slots is 0; set it to at least 1 (one slot per deployment) and restart the server")
	}
	if !replication {
		out = append(out, "the login lacks the REPLICATION attribute; run: "+strings.Join(Grants(login), "; "))
	}
	src := &Postgres{Names: n, Tables: tables}
	if why, _, err := src.slotProblem(ctx, conn, anyFrom); err != nil || why != "" {
		out = append(out, why+errText(err))
	}
	if _, why, err := src.declared(ctx, conn); err != nil || why != "" {
		out = append(out, why+errText(err))
	}
	return out
}

func errText(err error) string {
	if err != nil {
		return err.Error()
	}
	return ""
}
