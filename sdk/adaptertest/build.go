package adaptertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildPlugin builds the adapter's main package (an import path or a
// directory, as `go build` takes it) into a fresh temporary folder as
// verifier-adapter-<kind>, the name the daemon discovers. It is meant for
// TestMain, so that the kit and the package's own tests drive the real
// binary; call cleanup when the tests are done.
func BuildPlugin(pkg, kind string) (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "verifier-adapter-"+kind+"-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	path = filepath.Join(dir, "verifier-adapter-"+kind)
	build := exec.Command("go", "build", "-o", path, pkg)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("building %s: %w", pkg, err)
	}
	return path, cleanup, nil
}

// MainWithPlugin is a whole TestMain for an adapter package: it builds the
// plugin into *path, runs the tests and removes the binary. It exits the
// process with the tests' code, or 1 when the build fails.
func MainWithPlugin(m interface{ Run() int }, pkg, kind string, path *string) {
	p, cleanup, err := BuildPlugin(pkg, kind)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*path = p
	code := m.Run()
	cleanup()
	os.Exit(code)
}
