package config

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk/refusal"
)

func TestParseChanges(t *testing.T) {
	t.Parallel()
	const base = "effects:\n  kind: sql\n  sql_driver: postgres\n  sql_query: SELECT * FROM encounters WHERE patient_id = :pid\n  sql_query_params: {pid: {param: pid}}\n"
	d, err := ParseDeployment([]byte(base + "  changes: {source: logical, tables: [encounters, audit.log]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := d.Candidates[0]
	if c.Changes == nil || c.Changes.Source != ChangesSourceLogical || !slices.Equal(c.Changes.Tables, []string{"encounters", "audit.log"}) {
		t.Fatalf("changes = %+v", c.Changes)
	}
	if _, sent := c.Section["changes"]; sent {
		t.Error("changes: reaches the adapter; it is the daemon's key")
	}
	// A narrowed read with a write set proves newness over the collection.
	if c.NewnessOf() != NewnessWriteSet || c.CollateralScope() != ScopeCollection {
		t.Errorf("newness %q scope %q", c.NewnessOf(), c.CollateralScope())
	}
	// A census beside it adds its loss; newness stays the write set's.
	d, err = ParseDeployment([]byte(base + "  census: {sql_query: SELECT id FROM encounters WHERE deleted_at IS NULL, census_scope: declared}\n  changes: {source: logical, tables: [encounters]}\n"))
	if err != nil {
		t.Fatalf("census beside changes: %v", err)
	}
	if d.Candidates[0].Census == nil || d.Candidates[0].NewnessOf() != NewnessWriteSet {
		t.Errorf("census beside changes: census %v, newness %q", d.Candidates[0].Census, d.Candidates[0].NewnessOf())
	}
	for _, tt := range []struct{ name, doc, path, text string }{
		{"not postgres", strings.Replace(base, "postgres", "mysql", 1) + "  changes: {source: logical, tables: [t]}\n", "effects.changes", "sql_driver: postgres"},
		{"bad source", base + "  changes: {source: binlog, tables: [t]}\n", "effects.changes.source", "logical"},
		{"no tables", base + "  changes: {source: logical, tables: []}\n", "effects.changes.tables", "non-empty"},
		{"bad table", base + "  changes: {source: logical, tables: [\"a b\"]}\n", "effects.changes.tables[0]", "table name"},
		{"unknown key", base + "  changes: {source: logical, tables: [t], slot: x}\n", "effects.changes.slot", "source: and tables:"},
		{"with newness", base + "  newness: whole_read\n  changes: {source: logical, tables: [t]}\n", "effects.changes", "remove newness:"},
		{"not a map", base + "  changes: logical\n", "effects.changes", "must be a map"},
	} {
		_, err := ParseDeployment([]byte(tt.doc))
		ce, ok := errors.AsType[*refusal.Error](err)
		if !ok || ce.Path != tt.path || !strings.Contains(ce.Message, tt.text) {
			t.Errorf("%s: %v, want path %s with %q", tt.name, err, tt.path, tt.text)
		}
	}
}
