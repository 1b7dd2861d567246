// Command modproxy adds one module version to a file-system Go module proxy
// (the layout GOPROXY=file://DIR reads): DIR/<module>/@v/list, <v>.info,
// <v>.mod and <v>.zip, the zip made by golang.org/x/mod/zip as the go
// command makes it. `make release` (scripts/release.sh) runs it for each
// public module of the repository.
//
//	modproxy -out DIR -module PATH -version vX.Y.Z -dir MODULE_DIR [-time RFC3339]
//
// The go.mod it publishes (in the zip and as <v>.mod) is MODULE_DIR/go.mod
// without its replace directives, which serve development in the
// repository only. MODULE_DIR is rewritten in place, so give it a staged
// copy (git archive), never the work tree.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	out := flag.String("out", "", "the proxy's root folder")
	mod := flag.String("module", "", "module path")
	version := flag.String("version", "", "version, vX.Y.Z")
	dir := flag.String("dir", "", "a staged copy of the module's folder (its go.mod is rewritten)")
	when := flag.String("time", "", "the version's time, RFC 3339 (default: now)")
	flag.Parse()
	if err := publish(*out, *mod, *version, *dir, *when); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

// publish writes the four files of mod@version under out.
func publish(out, mod, version, dir, when string) error {
	if out == "" || mod == "" || dir == "" {
		return errors.New("-out, -module and -dir are required")
	}
	mv := module.Version{Path: mod, Version: version}
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("-version %q is not a canonical semantic version; give vX.Y.Z", version)
	}
	if err := module.Check(mod, version); err != nil {
		return fmt.Errorf("-module/-version: %w", err)
	}
	t := time.Now().UTC()
	if when != "" {
		var err error
		if t, err = time.Parse(time.RFC3339, when); err != nil {
			return fmt.Errorf("-time %q: %w; give RFC 3339, e.g. 2026-12-07T18:00:00Z", when, err)
		}
	}
	gomod, err := publishedGoMod(filepath.Join(dir, "go.mod"), mod)
	if err != nil {
		return err
	}
	esc, err := module.EscapePath(mod)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	return writeVersion(vdir, dir, mv, gomod, t)
}

// publishedGoMod reads path, checks it declares mod, drops its replace
// directives, writes it back and returns it.
func publishedGoMod(path, mod string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		return nil, err
	}
	if f.Module == nil || f.Module.Mod.Path != mod {
		return nil, fmt.Errorf("%s does not declare module %s; give -dir the module's own folder", path, mod)
	}
	for _, r := range slices.Clone(f.Replace) {
		if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
			return nil, err
		}
	}
	f.Cleanup()
	out, err := f.Format()
	if err != nil {
		return nil, err
	}
	return out, os.WriteFile(path, out, 0o644)
}

// writeVersion writes <v>.mod, <v>.zip, <v>.info and adds v to list.
func writeVersion(vdir, dir string, mv module.Version, gomod []byte, t time.Time) error {
	v := mv.Version
	if err := os.WriteFile(filepath.Join(vdir, v+".mod"), gomod, 0o644); err != nil {
		return err
	}
	z, err := os.Create(filepath.Join(vdir, v+".zip"))
	if err != nil {
		return err
	}
	if err := zip.CreateFromDir(z, mv, dir); err != nil {
		z.Close()
		return fmt.Errorf("zipping %s@%s from %s: %w", mv.Path, v, dir, err)
	}
	if err := z.Close(); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{v, t})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(vdir, v+".info"), info, 0o644); err != nil {
		return err
	}
	return addToList(filepath.Join(vdir, "list"), v)
}

// addToList adds v to the proxy's version list, once, sorted.
func addToList(path, v string) error {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	vs := strings.Fields(string(data))
	if !slices.Contains(vs, v) {
		vs = append(vs, v)
	}
	semver.Sort(vs)
	return os.WriteFile(path, []byte(strings.Join(vs, "\n")+"\n"), 0o644)
}
