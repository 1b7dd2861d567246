package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/verifierd/verifierd/sdk/refusal"
)

// TestKitFreshnessSpelling: the kit's graphql_freshness_* load as the
// daemon's freshness_*, never reach the adapter, and leave one notice per
// key naming the canonical key, handed out once.
func TestKitFreshnessSpelling(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		doc, path string
	}{
		"one kind": {"effects: {kind: graphql, base_url: 'https://h', graphql_query: '{a {id}}', graphql_freshness_field: updatedAt, graphql_freshness_window_s: 90}\n", "effects"},
		"a candidate": {"effects: {candidates: [{kind: sql, sql_query: 'SELECT 1'}, {kind: graphql, base_url: 'https://h', graphql_query: '{a {id}}', graphql_freshness_field: updatedAt, graphql_freshness_window_s: 90}]}\n",
			"effects.candidates[1]"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d, err := ParseDeployment([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			c := d.Candidates[len(d.Candidates)-1]
			if c.Freshness == nil || c.Freshness.Field != "updatedAt" || c.Freshness.WindowS != 90 {
				t.Fatalf("freshness %+v, want updatedAt within 90 s", c.Freshness)
			}
			for k := range c.Section {
				if strings.Contains(k, "freshness") {
					t.Errorf("the adapter would receive %s", k)
				}
			}
			if len(d.Notices) != 2 || d.Notices[0].Path != tc.path+".graphql_freshness_field" || !strings.Contains(d.Notices[0].Message, "freshness_field") ||
				d.Notices[1].Path != tc.path+".graphql_freshness_window_s" || !strings.Contains(d.Notices[1].Message, "freshness_window_s") {
				t.Fatalf("notices %+v", d.Notices)
			}
			if got := d.TakeNotices(); len(got) != 2 {
				t.Fatalf("first TakeNotices = %v, want both", got)
			}
			if got := d.TakeNotices(); got != nil {
				t.Fatalf("second TakeNotices = %v, want none", got)
			}
		})
	}
}

func TestKitSpellingRefusals(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ doc, path string }{
		"both spellings": {"effects: {kind: graphql, freshness_field: a, graphql_freshness_field: b, freshness_window_s: 5}\n", "effects.graphql_freshness_field"},
		// Renamed, then checked as the canonical keys are.
		"window without field": {"effects: {kind: graphql, graphql_freshness_window_s: 5}\n", "effects.freshness_field"},
		"bad window":           {"effects: {kind: graphql, graphql_freshness_field: a, graphql_freshness_window_s: -1}\n", "effects.freshness_window_s"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseDeployment([]byte(tc.doc))
			var ce *refusal.Error
			if !errors.As(err, &ce) || ce.Path != tc.path {
				t.Fatalf("err = %v, want a refusal at %s", err, tc.path)
			}
		})
	}
}

// TestKitSpellingOnlyItsKind: another kind's section is left as written
// (its adapter's strict decoder refuses the key), and a deployment in
// verifierd's own spelling has no notice.
func TestKitSpellingOnlyItsKind(t *testing.T) {
	t.Parallel()
	d, err := ParseDeployment([]byte("effects: {kind: rest, base_url: 'https://h', graphql_freshness_field: a, graphql_freshness_window_s: 5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Candidates[0]; c.Freshness != nil || c.Section["graphql_freshness_field"] != "a" || len(d.Notices) != 0 {
		t.Fatalf("rest section read as %+v (notices %v); want it left for the adapter", c, d.Notices)
	}
	d, err = ParseDeployment([]byte("effects: {kind: graphql, freshness_field: a, freshness_window_s: 5}\n"))
	if err != nil || len(d.Notices) != 0 || d.TakeNotices() != nil {
		t.Fatalf("canonical spelling: %v, notices %v", err, d.Notices)
	}
}
