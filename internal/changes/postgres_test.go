package changes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/verifierd/verifierd/internal/testservers"
	"github.com/verifierd/verifierd/internal/testservers/sqlservers"
	"github.com/verifierd/verifierd/judge"
)

// These tests run against a real PostgreSQL (Debian package postgresql)
// started on loopback with wal_level=logical, once per test binary.

var pg struct {
	dir  string
	once sync.Once
	srv  *sqlservers.Postgres
	err  error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "changes-servers-")
	if err == nil {
		err = os.Chmod(dir, 0o755) // the server runs as its own user
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pg.dir = dir
	code := m.Run()
	if pg.srv != nil {
		pg.srv.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func server(t testing.TB) *sqlservers.Postgres {
	t.Helper()
	pg.once.Do(func() { pg.srv, pg.err = sqlservers.StartPostgres(pg.dir) })
	if errors.Is(pg.err, sqlservers.ErrNotInstalled) {
		testservers.Missing(t, "PostgreSQL", "apt-get install postgresql")
	}
	if pg.err != nil {
		log := ""
		if pg.srv != nil {
			log = pg.srv.Log()
		}
		t.Fatalf("PostgreSQL could not start: %v\n%s", pg.err, log)
	}
	return pg.srv
}

// fixture is one deployment's slot over its own tables, set up by the
// administrator; the source logs in as the read role, granted what
// Grants prints.
type fixture struct {
	srv    *sqlservers.Postgres
	names  Names
	source *Postgres
}

func setup(t *testing.T, deployment string, tables ...string) *fixture {
	t.Helper()
	return setupTB(t, deployment, tables...)
}

func setupTB(t testing.TB, deployment string, tables ...string) *fixture {
	t.Helper()
	srv := server(t)
	ctx := context.Background()
	names, err := NamesFor(deployment)
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, tb := range tables {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s (id bigserial PRIMARY KEY, patient_id text NOT NULL, status text, note text, at timestamptz, payload jsonb)", tb))
	}
	exec(t, srv, append(stmts, Grants(srv.Reader.User)...)...)
	admin := connect(t, srv, srv.Admin)
	if err := Setup(ctx, admin, names, tables); err != nil {
		t.Fatal(err)
	}
	src := &Postgres{Names: names, Tables: tables, Connect: func(ctx context.Context) (*pgx.Conn, error) {
		return srv.Connect(ctx, srv.Database, srv.Reader)
	}}
	t.Cleanup(func() {
		src.Close(context.Background())
		if err := Drop(context.Background(), admin, names); err != nil {
			t.Error(err)
		}
		admin.Close(context.Background())
	})
	return &fixture{srv: srv, names: names, source: src}
}

func connect(t testing.TB, srv *sqlservers.Postgres, a sqlservers.Account) *pgx.Conn {
	t.Helper()
	c, err := srv.Connect(context.Background(), srv.Database, a)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func exec(t testing.TB, srv *sqlservers.Postgres, stmts ...string) {
	t.Helper()
	if err := srv.Exec(context.Background(), srv.Database, stmts...); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) position(t testing.TB) Position {
	t.Helper()
	p, err := f.source.Position(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) read(t testing.TB, from Position) judge.WriteSet {
	t.Helper()
	ws, err := f.source.Read(context.Background(), from, f.position(t))
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// summary is a change as op table id [field=value].
func summary(ws judge.WriteSet, field string) []string {
	var out []string
	for _, ch := range ws.Changes {
		img := ch.After
		if img == nil {
			img = ch.Before
		}
		out = append(out, fmt.Sprintf("%s %s %v %s=%v", ch.Op, ch.Table, img["id"], field, img[field]))
	}
	return out
}

func TestPostgresReadsCommittedChangesOfDeclaredTables(t *testing.T) {
	f := setup(t, "ws_read", "enc_read", "notes_read")
	exec(t, f.srv, "CREATE TABLE other_read (id int)",
		"INSERT INTO enc_read (patient_id, status) VALUES ('p0', 'open')") // before Begin
	begin := f.position(t)
	exec(t, f.srv,
		"INSERT INTO enc_read (patient_id, status, at, payload) VALUES ('p1', 'open', '2026-01-02 03:04:05.5+02', '{\"a\": 1}')",
		"UPDATE enc_read SET status = 'closed' WHERE patient_id = 'p0'",
		"INSERT INTO notes_read (patient_id) VALUES ('p9')",
		"DELETE FROM notes_read WHERE patient_id = 'p9'",
		"INSERT INTO other_read VALUES (1)", // not declared, not published
	)
	// An uncommitted transaction is not in the write set.
	open := connect(t, f.srv, f.srv.Admin)
	defer open.Close(context.Background())
	tx, err := open.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(context.Background(), "INSERT INTO enc_read (patient_id) VALUES ('uncommitted')"); err != nil {
		t.Fatal(err)
	}
	ws := f.read(t, begin)
	if !ws.Reachable || !ws.Complete {
		t.Fatalf("write set reachable=%v complete=%v reason=%q", ws.Reachable, ws.Complete, ws.Reason)
	}
	want := []string{
		"insert enc_read 2 status=open",
		"update enc_read 1 status=closed",
		"insert notes_read 1 status=<nil>",
		"delete notes_read 1 status=<nil>",
	}
	if got := summary(ws, "status"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ins, upd := ws.Changes[0].After, ws.Changes[1]
	if ins["id"] != json.Number("2") || ins["at"] != "2026-01-02T01:04:05.5Z" || string(ins["payload"].(json.RawMessage)) != `{"a": 1}` {
		t.Errorf("insert image values: %#v", ins)
	}
	if upd.Before["status"] != "open" || upd.After["status"] != "closed" || upd.Before["patient_id"] != "p0" {
		t.Errorf("update images: before %v after %v", upd.Before, upd.After)
	}
}

// A slot advanced past a session's Begin position has discarded its
// changes: the write set is not complete, never guessed.
func TestPostgresDiscardedPositionIsNotComplete(t *testing.T) {
	f := setup(t, "ws_discard", "enc_discard")
	begin := f.position(t)
	exec(t, f.srv, "INSERT INTO enc_discard (patient_id) VALUES ('p1')")
	later := f.position(t)
	if _, err := f.source.Read(context.Background(), later, later); err != nil { // flushes up to later
		t.Fatal(err)
	}
	if err := f.source.Advance(context.Background(), later); err != nil {
		t.Fatal(err)
	}
	ws := f.read(t, begin)
	if !ws.Reachable || ws.Complete || !strings.Contains(ws.Reason, "discarded") || len(ws.Changes) != 0 {
		t.Fatalf("write set after the slot passed Begin: %+v", ws)
	}
	if ws = f.read(t, later); !ws.Complete || len(ws.Changes) != 0 {
		t.Fatalf("write set from the slot's own position: %+v", ws)
	}
}

// Holds keep the slot at the oldest open session's position: advancing to
// Oldest leaves every open session's write set complete.
func TestHoldsAdvanceOnlyPastTheOldestOpenSession(t *testing.T) {
	f := setup(t, "ws_holds", "enc_holds")
	h := Holds{}
	if _, ok := h.Oldest(LessLSN); ok {
		t.Fatal("empty holds have an oldest position")
	}
	first := f.position(t)
	h["s1"] = Hold{From: first}
	exec(t, f.srv, "INSERT INTO enc_holds (patient_id) VALUES ('p1')")
	second := f.position(t)
	h["s2"] = Hold{From: second}
	exec(t, f.srv, "INSERT INTO enc_holds (patient_id) VALUES ('p2')")
	oldest, _ := h.Oldest(LessLSN)
	if oldest != first {
		t.Fatalf("oldest = %s, want %s", oldest, first)
	}
	if err := f.source.Advance(context.Background(), oldest); err != nil {
		t.Fatal(err)
	}
	if ws := f.read(t, first); !ws.Complete || len(ws.Changes) != 2 {
		t.Fatalf("s1 after advancing to the oldest hold: %+v", ws)
	}
	if !h.ReleasePrefix("s1") || h.ReleasePrefix("s1") {
		t.Fatal("ReleasePrefix reports no release of a hold, or a second one")
	}
	if oldest, _ = h.Oldest(LessLSN); oldest != second {
		t.Fatalf("oldest after releasing s1 = %s, want %s", oldest, second)
	}
	if err := f.source.Advance(context.Background(), oldest); err != nil {
		t.Fatal(err)
	}
	if ws := f.read(t, second); !ws.Complete || len(ws.Changes) != 1 || ws.Changes[0].After["patient_id"] != "p2" {
		t.Fatalf("s2 after advancing past s1: %+v", ws)
	}
	if ws := f.read(t, first); ws.Complete {
		t.Fatalf("s1's released position still reads complete: %+v", ws)
	}
}

// What the log cannot show as row images makes the write set incomplete:
// a TRUNCATE, and a table without REPLICA IDENTITY FULL.
func TestPostgresChangesWithoutImagesAreNotComplete(t *testing.T) {
	f := setup(t, "ws_images", "enc_images")
	exec(t, f.srv, "INSERT INTO enc_images (patient_id) VALUES ('p1')")
	begin := f.position(t)
	exec(t, f.srv, "TRUNCATE enc_images")
	if ws := f.read(t, begin); ws.Complete || !strings.Contains(ws.Reason, "truncated") {
		t.Fatalf("write set over a TRUNCATE: %+v", ws)
	}
	exec(t, f.srv, "ALTER TABLE enc_images REPLICA IDENTITY DEFAULT")
	begin = f.position(t)
	if ws := f.read(t, begin); ws.Complete || !strings.Contains(ws.Reason, "REPLICA IDENTITY FULL") {
		t.Fatalf("write set of a table without REPLICA IDENTITY FULL: %+v", ws)
	}
}

// A missing slot is an unreachable write set naming the fix; preflight
// names every missing piece and is silent once setup ran.
func TestPreflightAndMissingSlot(t *testing.T) {
	srv := server(t)
	ctx := context.Background()
	exec(t, srv, "CREATE TABLE enc_pre (id bigserial PRIMARY KEY, patient_id text)", "CREATE ROLE pre_login LOGIN PASSWORD 'x'")
	names, _ := NamesFor("ws_pre")
	admin := connect(t, srv, srv.Admin)
	defer admin.Close(ctx)
	src := &Postgres{Names: names, Tables: []string{"enc_pre"}, Connect: func(ctx context.Context) (*pgx.Conn, error) {
		return srv.Connect(ctx, srv.Database, srv.Admin)
	}}
	defer src.Close(ctx)
	pos, err := src.Position(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := src.Read(ctx, pos, pos)
	if err != nil || ws.Reachable || !strings.Contains(ws.Reason, "verifyctl changes setup") {
		t.Fatalf("missing slot: %+v, %v", ws, err)
	}
	got := strings.Join(Preflight(ctx, admin, names, []string{"enc_pre", "absent_table"}), "\n")
	for _, want := range []string{"replication slot verifierd_ws_pre does not exist", "absent_table does not exist", "enc_pre is not in the publication"} {
		if !strings.Contains(got, want) {
			t.Errorf("preflight before setup lacks %q:\n%s", want, got)
		}
	}
	if err := Setup(ctx, admin, names, []string{"enc_pre"}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = Drop(ctx, admin, names) }()
	if got := Preflight(ctx, admin, names, []string{"enc_pre"}); len(got) != 0 {
		t.Fatalf("preflight after setup: %q", got)
	}
	login := connect(t, srv, sqlservers.Account{User: "pre_login", Password: "x"})
	defer login.Close(ctx)
	if got := strings.Join(Preflight(ctx, login, names, []string{"enc_pre"}), "\n"); !strings.Contains(got, `ALTER ROLE "pre_login" WITH REPLICATION`) {
		t.Fatalf("preflight of a login without REPLICATION:\n%s", got)
	}
	st, err := Status(ctx, admin, names)
	if err != nil || !st.Exists || st.Confirmed == "" || st.RetainedBytes < 0 {
		t.Fatalf("status: %+v, %v", st, err)
	}
	if _, err := NamesFor("Bad-Name"); err == nil || !strings.Contains(err.Error(), "deployment name") {
		t.Fatalf("NamesFor(Bad-Name) = %v", err)
	}
}

// An update that leaves a TOASTed value unchanged sends it as "unchanged"
// in the new image: the after image takes it from the before image
// (REPLICA IDENTITY FULL), so both images are whole.
func TestPostgresUnchangedToastedValue(t *testing.T) {
	f := setup(t, "ws_toast", "enc_toast")
	exec(t, f.srv, "INSERT INTO enc_toast (patient_id, status, note) SELECT 'p1', 'open', string_agg(md5(g::text), '') FROM generate_series(1, 4000) g")
	begin := f.position(t)
	exec(t, f.srv, "UPDATE enc_toast SET status = 'closed'")
	ws := f.read(t, begin)
	if !ws.Complete || len(ws.Changes) != 1 {
		t.Fatalf("write set: %+v", ws.Reason)
	}
	ch := ws.Changes[0]
	before, _ := ch.Before["note"].(string)
	after, _ := ch.After["note"].(string)
	if len(before) != 4000*32 || after != before || ch.After["status"] != "closed" {
		t.Fatalf("images: before note %d bytes, after note %d bytes (equal %v), after status %v", len(before), len(after), after == before, ch.After["status"])
	}
}

// Reading past a session's window sees nothing after it, and a Begin
// position that is not an LSN is an incomplete write set naming it.
func TestPostgresWindowBounds(t *testing.T) {
	f := setup(t, "ws_bounds", "enc_bounds")
	begin := f.position(t)
	exec(t, f.srv, "INSERT INTO enc_bounds (patient_id) VALUES ('in')")
	end := f.position(t)
	exec(t, f.srv, "INSERT INTO enc_bounds (patient_id) VALUES ('after')")
	f.position(t)
	ws, err := f.source.Read(context.Background(), begin, end)
	if err != nil || !ws.Complete || len(ws.Changes) != 1 || ws.Changes[0].After["patient_id"] != "in" {
		t.Fatalf("window [begin, end): %+v, %v", ws, err)
	}
	ws, err = f.source.Read(context.Background(), "not-an-lsn", end)
	if err != nil || ws.Complete || !strings.Contains(ws.Reason, `"not-an-lsn" is not an LSN`) {
		t.Fatalf("bad Begin position: %+v, %v", ws, err)
	}
}
