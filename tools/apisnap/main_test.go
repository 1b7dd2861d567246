package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAliasReach: an exported alias of an internal type promises that
// type's exported fields and methods, and the internal types those name;
// the internal package itself and its unexported names are left out.
func TestAliasReach(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.24\n")
	write("internal/in/in.go", `package in

type Batch struct {
	Names []string
	hidden int
}

type Field struct{ Kind uint8 }

type Helper struct{}

func (b *Batch) Len() int          { return b.hidden }
func (b *Batch) At(int) []Field    { return nil }
func (b *Batch) intern(string) int { return 0 }
func (Helper) Do()                 {}

func Free(*Batch) Helper { return Helper{} }
`)
	write("pub/pub.go", `package pub

import "example.com/m/internal/in"

type Batch = in.Batch

func New() *Batch { return nil }
`)
	lines, err := snapshot(dir, "", []string{"./..."})
	if err != nil {
		t.Fatal(err)
	}
	const p = "pkg example.com/m/pub, "
	want := []string{
		p + "func New() *Batch\n",
		p + "method (*Batch) At(int) []example.com/m/internal/in.Field\n",
		p + "method (*Batch) Len() int\n",
		p + "type Batch = example.com/m/internal/in.Batch\n",
		p + "type Batch struct\n",
		p + "type Batch struct, Names []string\n",
		p + "type example.com/m/internal/in.Field struct\n",
		p + "type example.com/m/internal/in.Field struct, Kind uint8\n",
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("snapshot:\n%q\nwant:\n%q", lines, want)
	}
}
