package sql

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The table-delta audit brackets a whole run: count the rows of the audited
// tables before it and after it, and confirm only when every table moved by
// exactly its declared delta and every other audited table by 0. It reads
// through the same drivers, connection settings and read-only transactions
// as the adapter; `verifyctl audit-tables` is its command line.

// TableName is a validated table name, optionally qualified by its schema
// (PostgreSQL) or database (MySQL). It is always quoted when counted, so it
// is matched exactly, case included.
type TableName struct {
	Schema string
	Table  string
}

func (t TableName) String() string {
	if t.Schema == "" {
		return t.Table
	}
	return t.Schema + "." + t.Table
}

// quoted is the name as an identifier quoted with q (" or `). The parts
// never hold a quote: ParseTableName refuses them.
func (t TableName) quoted(q string) string {
	if t.Schema == "" {
		return q + t.Table + q
	}
	return q + t.Schema + q + "." + q + t.Table + q
}

const maxIdentifier = 64

// ParseTableName reads "table" or "schema.table". Each part is letters,
// digits, '_', '$', '-' and inner spaces (Frappe's "tabLoan Application"),
// at most 64 bytes: nothing that could close a quoted identifier.
func ParseTableName(s string) (TableName, error) {
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return TableName{}, fmt.Errorf("table %q: write table or schema.table", s)
	}
	for _, p := range parts {
		if err := checkIdentifier(p); err != nil {
			return TableName{}, fmt.Errorf("table %q: %v", s, err)
		}
	}
	if len(parts) == 2 {
		return TableName{Schema: parts[0], Table: parts[1]}, nil
	}
	return TableName{Table: parts[0]}, nil
}

func checkIdentifier(p string) error {
	if p == "" {
		return fmt.Errorf("an empty name")
	}
	if len(p) > maxIdentifier {
		return fmt.Errorf("a name longer than %d bytes", maxIdentifier)
	}
	if p[0] == ' ' || p[len(p)-1] == ' ' {
		return fmt.Errorf("a name may not start or end with a space")
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !isIdentByte(c) && c != '-' && c != ' ' {
			return fmt.Errorf("%q is not allowed in a name (letters, digits, _, $, - and spaces)", c)
		}
	}
	return nil
}

// ParseTables reads a comma-separated list of table names.
func ParseTables(list string) ([]TableName, error) {
	var out []TableName
	seen := map[string]bool{}
	for s := range strings.SplitSeq(list, ",") {
		t, err := ParseTableName(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		if seen[t.String()] {
			return nil, fmt.Errorf("table %q is listed twice", t.String())
		}
		seen[t.String()] = true
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no tables")
	}
	return out, nil
}

// ParseExpect reads "a=+1,b=0,c=-2": the declared row-count delta of some
// of the audited tables. Every table it names must be audited; the others
// are expected to move by 0.
func ParseExpect(s string, tables []TableName) (map[string]int64, error) {
	out := map[string]int64{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	audited := map[string]bool{}
	for _, t := range tables {
		audited[t.String()] = true
	}
	for item := range strings.SplitSeq(s, ",") {
		name, delta, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return nil, fmt.Errorf("%q: write table=+N, table=-N or table=0", item)
		}
		t, err := ParseTableName(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		if !audited[t.String()] {
			return nil, fmt.Errorf("%q has an expected delta but is not among the audited tables; add it to --tables", t.String())
		}
		if _, dup := out[t.String()]; dup {
			return nil, fmt.Errorf("%q has two expected deltas", t.String())
		}
		n, err := strconv.ParseInt(strings.TrimSpace(delta), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: the delta %q is not an integer such as +1, -2 or 0", item, delta)
		}
		out[t.String()] = n
	}
	return out, nil
}

// countIn counts the rows of each table with one statement per table
// through query, on a transaction the caller opened read-only.
func countIn(ctx context.Context, tables []TableName, quote string, query func(string) (int64, error)) ([]int64, error) {
	counts := make([]int64, len(tables))
	for i, t := range tables {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, err := query("SELECT count(*) FROM " + t.quoted(quote))
		if err != nil {
			return nil, fmt.Errorf("counting %s: %w", t, err)
		}
		counts[i] = n
	}
	return counts, nil
}

// Counter counts rows in the database a deployment's sql section names.
type Counter struct {
	r reader
}

// OpenCounter prepares a Counter for a sql deployment section (the
// effects section or one candidate, as JSON). secrets holds the password
// under "sql_password_env" when the section names one. It does not
// connect.
func OpenCounter(ctx context.Context, section json.RawMessage, secrets map[string]string) (*Counter, error) {
	cfg, driver, err := decodeConfig(section)
	if err != nil {
		return nil, err
	}
	r, err := newReader(ctx, cfg, driver, secrets)
	if err != nil {
		return nil, err
	}
	return &Counter{r: r}, nil
}

// Source names the database (driver, login, address, database), never
// with the password. A snapshot remembers it, so that the audit after the
// run compares counts of the same database.
func (c *Counter) Source() string { return c.r.where() }

// Count returns the row count of each table, read in one read-only
// transaction bounded by ctx.
func (c *Counter) Count(ctx context.Context, tables []TableName) (map[string]int64, error) {
	n, err := c.r.count(ctx, tables)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(tables))
	for i, t := range tables {
		out[t.String()] = n[i]
	}
	return out, nil
}

// Close releases the connections.
func (c *Counter) Close() { c.r.close() }

// Snapshot is the row counts taken before a run.
type Snapshot struct {
	Source  string           `json:"source"`
	TakenAt time.Time        `json:"taken_at"`
	Counts  map[string]int64 `json:"counts"`
}

// TableDelta is one audited table's counts. After and Delta are nil when
// the counts after the run could not be read.
type TableDelta struct {
	Table    string `json:"table"`
	Before   int64  `json:"before"`
	After    *int64 `json:"after"`
	Delta    *int64 `json:"delta"`
	Expected int64  `json:"expected"`
}

// AuditReason explains an audit verdict.
type AuditReason struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// AuditResult is the table-delta audit's verdict.
type AuditResult struct {
	Verdict string        `json:"verdict"`
	Tables  []TableDelta  `json:"tables"`
	Reasons []AuditReason `json:"reasons"`
}

// Audit verdicts, as the judge spells them.
const (
	AuditConfirmed     = "CONFIRMED"
	AuditRefuted       = "REFUTED"
	AuditIndeterminate = "INDETERMINATE"
)

// Audit reason codes.
const (
	ReasonTableDeltaExact    = "TABLE_DELTA_EXACT"
	ReasonTableDeltaMismatch = "TABLE_DELTA_MISMATCH"
	ReasonTablesUnreadable   = "SOR_UNREACHABLE"
)

// AuditDeltas judges the audited tables: CONFIRMED when each moved by
// exactly its expected delta (0 when expect does not name it), REFUTED
// otherwise, INDETERMINATE when the counts after the run are unknown (after
// is nil; unreadable says why). before must hold every table.
func AuditDeltas(tables []TableName, before, after map[string]int64, expect map[string]int64, unreadable string) AuditResult {
	res := AuditResult{Verdict: AuditConfirmed, Tables: make([]TableDelta, 0, len(tables)), Reasons: []AuditReason{}}
	for _, t := range tables {
		name := t.String()
		d := TableDelta{Table: name, Before: before[name], Expected: expect[name]}
		if after != nil {
			a := after[name]
			delta := a - d.Before
			d.After, d.Delta = &a, &delta
			if delta != d.Expected {
				res.Verdict = AuditRefuted
				res.Reasons = append(res.Reasons, AuditReason{Code: ReasonTableDeltaMismatch,
					Message: fmt.Sprintf("%s moved by %s (%d -> %d), expected %s", name, signed(delta), d.Before, a, signed(d.Expected))})
			}
		}
		res.Tables = append(res.Tables, d)
	}
	switch {
	case after == nil:
		res.Verdict = AuditIndeterminate
		res.Reasons = []AuditReason{{Code: ReasonTablesUnreadable, Message: "the row counts after the run could not be read: " + unreadable}}
	case res.Verdict == AuditConfirmed:
		res.Reasons = []AuditReason{{Code: ReasonTableDeltaExact, Message: fmt.Sprintf("each of the %d audited tables moved by exactly its expected delta", len(tables))}}
	}
	return res
}

func signed(n int64) string {
	if n > 0 {
		return "+" + strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10)
}
