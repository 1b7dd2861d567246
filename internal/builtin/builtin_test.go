package builtin

import (
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTableMatchesCmdPlugins keeps the table and the folders the Makefile
// builds the same: every cmd/plugins/<kind> is in the table and every
// first-party adapter has its main there.
func TestTableMatchesCmdPlugins(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir("../../cmd/plugins")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	var kinds []string
	for _, a := range Adapters {
		kinds = append(kinds, a.Kind)
	}
	slices.Sort(kinds)
	if diff := cmp.Diff(kinds, dirs); diff != "" {
		t.Errorf("built-in kinds (-table +cmd/plugins):\n%s", diff)
	}
}

func TestIsKind(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{"sql": true, "ui_readback": true, "onscreen": true, "csv-ledger": false, "": false}
	for kind, want := range tests {
		if got := IsKind(kind); got != want {
			t.Errorf("IsKind(%q) = %v, want %v", kind, got, want)
		}
	}
	if a, ok := Lookup("ui_readback"); !ok || a.Tier != 2 || a.Binary() != "verifier-adapter-ui_readback" || a.Package() != "./cmd/plugins/ui_readback" {
		t.Errorf("Lookup(ui_readback) = %+v, %v", a, ok)
	}
	// onscreen's tier comes from its configuration: 3 is the strongest.
	if a, ok := Lookup("onscreen"); !ok || a.Tier != 3 || !a.ConfiguredTier {
		t.Errorf("Lookup(onscreen) = %+v, %v", a, ok)
	}
	if a, _ := Lookup("sql"); a.ConfiguredTier {
		t.Error("sql's tier is pinned")
	}
}
