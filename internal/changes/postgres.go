package changes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/verifierd/verifierd/judge"
)

// Postgres is the logical-decoding source: the deployment's slot (plugin
// pgoutput) and publication, peeked with pg_logical_slot_peek_binary_changes
// (no replication connection). The login needs the REPLICATION attribute
// (Setup prints the GRANT). Peeking never moves the slot; Advance does.
type Postgres struct {
	// Connect opens a connection to the database the tables live in.
	Connect func(ctx context.Context) (*pgx.Conn, error)
	Names   Names
	// Tables are the declared tables, as written (schema-qualified or in
	// public).
	Tables []string

	mu   sync.Mutex
	conn *pgx.Conn
}

// LessLSN orders two PostgreSQL positions; a position that does not parse
// is the oldest (so a hold is never released by a typo).
func LessLSN(a, b Position) bool {
	x, errA := pglogrepl.ParseLSN(string(a))
	y, errB := pglogrepl.ParseLSN(string(b))
	if errA != nil || errB != nil {
		return errA != nil && errB == nil
	}
	return x < y
}

// with runs fn on the source's connection, opening it (TimeZone UTC, ISO
// dates, as the values are decoded) when there is none, and dropping it
// after an error so the next call reconnects.
func (p *Postgres) with(ctx context.Context, fn func(*pgx.Conn) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn == nil || p.conn.IsClosed() {
		c, err := p.Connect(ctx)
		if err != nil {
			return fmt.Errorf("connecting for the change log: %w", err)
		}
		if _, err := c.Exec(ctx, "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'"); err != nil {
			c.Close(ctx)
			return fmt.Errorf("setting the session's time zone: %w", err)
		}
		p.conn = c
	}
	err := fn(p.conn)
	if err != nil && ctx.Err() == nil {
		p.conn.Close(context.WithoutCancel(ctx))
		p.conn = nil
	}
	return err
}

// Close closes the source's connection.
func (p *Postgres) Close(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		p.conn.Close(ctx)
		p.conn = nil
	}
}

// Position is pg_current_wal_insert_lsn(): every transaction committed before the
// call has its commit record before it.
func (p *Postgres) Position(ctx context.Context) (Position, error) {
	var lsn string
	err := p.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn)
	})
	return Position(lsn), err
}

// Read peeks the slot and returns the changes to the declared tables of
// the transactions that committed at or after from and before upTo.
func (p *Postgres) Read(ctx context.Context, from, upTo Position) (judge.WriteSet, error) {
	start, perr := pglogrepl.ParseLSN(string(from))
	if perr != nil || start == anyFrom {
		// Not a failure of the read: a write set that says it is not
		// complete (the judge answers CHANGES_UNUSABLE).
		return judge.WriteSet{Reachable: true, Reason: fmt.Sprintf("the Begin position %q is not an LSN", from)}, nil //nolint:nilerr // reported in the write set
	}
	var ws judge.WriteSet
	err := p.with(ctx, func(c *pgx.Conn) error {
		var rerr error
		ws, rerr = p.read(ctx, c, start, upTo)
		return rerr
	})
	if err != nil {
		if ctx.Err() != nil {
			return judge.WriteSet{}, ctx.Err()
		}
		return judge.WriteSet{Reason: err.Error()}, nil
	}
	return ws, nil
}

func (p *Postgres) read(ctx context.Context, c *pgx.Conn, from pglogrepl.LSN, upTo Position) (judge.WriteSet, error) {
	ws := judge.WriteSet{Reachable: true}
	if why, missing, err := p.slotProblem(ctx, c, from); err != nil || why != "" {
		return judge.WriteSet{Reachable: err == nil && !missing, Reason: why}, err
	}
	if why, err := waitFlushed(ctx, c, upTo); err != nil || why != "" {
		return judge.WriteSet{Reachable: err == nil, Reason: why}, err
	}
	declared, why, err := p.declared(ctx, c)
	if err != nil || why != "" {
		return judge.WriteSet{Reachable: err == nil, Reason: why}, err
	}
	d := newDecoder(from, declared)
	rows, err := c.Query(ctx, "SELECT data FROM pg_logical_slot_peek_binary_changes($1, $2::pg_lsn, NULL, 'proto_version', '1', 'publication_names', $3)",
		p.Names.Slot, string(upTo), p.Names.Publication)
	if err != nil {
		return ws, err
	}
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&data}, func() error { return d.add(data) })
	if err != nil {
		return ws, err
	}
	ws.Changes = d.out
	ws.Complete, ws.Reason = d.problem == "", d.problem
	return ws, nil
}

// flushWait bounds how long Read waits for the server to flush its log
// to the poll's position: decoding reads only flushed log.
const flushWait = 10 * time.Second

// waitFlushed makes sure the log is flushed up to upTo. A server with
// synchronous_commit off flushes only its latest commit, late, so when the
// log is short of upTo a transaction that takes a transaction id commits
// synchronously, which flushes every record before its commit; then the
// flush position is polled with a growing interval until flushWait.
func waitFlushed(ctx context.Context, c *pgx.Conn, upTo Position) (string, error) {
	deadline := time.Now().Add(flushWait)
	for pause, forced := time.Millisecond, false; ; pause = min(2*pause, 100*time.Millisecond) {
		var reached bool
		if err := c.QueryRow(ctx, "SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn", string(upTo)).Scan(&reached); err != nil {
			return "", err
		}
		switch {
		case reached:
			return "", nil
		case !forced:
			// A login that may not take a transaction id (a read-only
			// default) only waits for the server's own flush.
			forced = true
			if err := forceFlush(ctx, c); err != nil && ctx.Err() != nil {
				return "", err
			}
			continue
		case time.Now().After(deadline):
			return fmt.Sprintf("the log was not flushed up to the poll's position %s within %s", upTo, flushWait), nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(pause):
		}
	}
}

// forceFlush commits, synchronously, a transaction that writes nothing but
// its commit record.
func forceFlush(ctx context.Context, c *pgx.Conn) error {
	return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on; SELECT pg_current_xact_id()")
		return err
	})
}

// anyFrom asks slotProblem only whether the slot exists (preflight).
const anyFrom = pglogrepl.LSN(0)

// slotProblem says why the slot cannot serve a window from from: it is
// missing, not pgoutput, or already past from (that part of the log is
// discarded). missing is true when there is no usable slot at all.
func (p *Postgres) slotProblem(ctx context.Context, c *pgx.Conn, from pglogrepl.LSN) (why string, missing bool, err error) {
	var plugin, confirmed string
	err = c.QueryRow(ctx, "SELECT coalesce(plugin, ''), coalesce(confirmed_flush_lsn::text, '') FROM pg_replication_slots WHERE slot_name = $1", p.Names.Slot).Scan(&plugin, &confirmed)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Sprintf("the replication slot %s does not exist; create it with verifyctl changes setup", p.Names.Slot), true, nil
	}
	if err != nil {
		return "", false, err
	}
	if plugin != "pgoutput" {
		return fmt.Sprintf("the replication slot %s uses the plugin %q, not pgoutput; drop it and run verifyctl changes setup", p.Names.Slot, plugin), true, nil
	}
	if at, perr := pglogrepl.ParseLSN(confirmed); from != anyFrom && (perr != nil || at > from) {
		//nolint:nilerr // an unparseable position is a discarded span, reported as such, not a failed call
		return fmt.Sprintf("the slot %s is at %s, past this session's Begin position %s: the changes since Begin are discarded", p.Names.Slot, confirmed, from), false, nil
	}
	return "", false, nil
}

// declared resolves the declared tables to "schema.table" and says why one
// cannot serve: missing, outside the publication, or without REPLICA
// IDENTITY FULL (its updates and deletes would carry no before image).
func (p *Postgres) declared(ctx context.Context, c *pgx.Conn) (map[string]string, string, error) {
	rows, err := c.Query(ctx, `SELECT t, coalesce(n.nspname || '.' || c.relname, ''), coalesce(c.relreplident::text, ''),
  EXISTS (SELECT 1 FROM pg_publication_tables pt WHERE pt.pubname = $2 AND pt.schemaname = n.nspname AND pt.tablename = c.relname)
FROM unnest($1::text[]) AS t LEFT JOIN pg_class c ON c.oid = to_regclass(t) LEFT JOIN pg_namespace n ON n.oid = c.relnamespace`,
		p.Tables, p.Names.Publication)
	if err != nil {
		return nil, "", err
	}
	out := map[string]string{}
	var problems []string
	var name, qualified, ident string
	var published bool
	_, err = pgx.ForEachRow(rows, []any{&name, &qualified, &ident, &published}, func() error {
		switch {
		case qualified == "":
			problems = append(problems, fmt.Sprintf("the table %s does not exist (or the login cannot see it)", name))
		case !published:
			problems = append(problems, fmt.Sprintf("the table %s is not in the publication %s; run verifyctl changes setup", name, p.Names.Publication))
		case ident != "f":
			problems = append(problems, fmt.Sprintf("the table %s lacks REPLICA IDENTITY FULL; run verifyctl changes setup", name))
		}
		out[qualified] = name
		return nil
	})
	return out, strings.Join(problems, "; "), err
}

// Advance moves the slot to to (the oldest open session's Begin position,
// or the current position when none is open), releasing the WAL before it.
// A slot already at or past to is left alone.
func (p *Postgres) Advance(ctx context.Context, to Position) error {
	if _, err := pglogrepl.ParseLSN(string(to)); err != nil {
		return fmt.Errorf("advance to %q: not an LSN", to)
	}
	return p.with(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SELECT pg_replication_slot_advance($1, $2::pg_lsn) FROM pg_replication_slots
WHERE slot_name = $1 AND confirmed_flush_lsn < $2::pg_lsn`, p.Names.Slot, string(to))
		return err
	})
}

// Ready says why the source cannot serve a session begun now: its slot is
// missing, or a declared table is missing, outside the publication or
// without REPLICA IDENTITY FULL ("" when it can).
func (p *Postgres) Ready(ctx context.Context) (string, error) {
	var why string
	err := p.with(ctx, func(c *pgx.Conn) error {
		w, _, err := p.slotProblem(ctx, c, anyFrom)
		if err != nil || w != "" {
			why = w
			return err
		}
		_, why, err = p.declared(ctx, c)
		return err
	})
	return why, err
}

// Status is the slot's state, read on the source's connection.
func (p *Postgres) Status(ctx context.Context) (SlotStatus, error) {
	var s SlotStatus
	err := p.with(ctx, func(c *pgx.Conn) error {
		var err error
		s, err = Status(ctx, c, p.Names)
		return err
	})
	return s, err
}

// Preflight is Preflight on the source's connection: one line per problem
// of the log's configuration, each naming its fix.
func (p *Postgres) Preflight(ctx context.Context) []string {
	var out []string
	err := p.with(ctx, func(c *pgx.Conn) error {
		out = Preflight(ctx, c, p.Names, p.Tables)
		return nil
	})
	if err != nil {
		return []string{err.Error()}
	}
	return out
}
