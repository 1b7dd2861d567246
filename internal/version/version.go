// Package version says which build of verifierd is running: the release
// version stamped at link time by `make release` (-ldflags -X), else the
// main module's version from the build information Go embeds, else
// "devel". verifierd --version, verifyctl version, the HTTP /health route
// and the verifierd_build_info metric all report it.
package version

import (
	"runtime"
	"runtime/debug"
)

// Version is the release version, set at link time:
//
//	go build -ldflags "-X github.com/verifierd/verifierd/internal/version.Version=v0.4.0"
//
// Empty in a development build; read it through Get, never directly.
var Version string

// Info describes the running build.
type Info struct {
	// Version is the release version (v0.4.0), the module version Go
	// recorded, or "devel".
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from, when Go
	// recorded one; Modified says the work tree had uncommitted changes.
	Revision string `json:"revision,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"go_version"`
}

// Get returns the running build's Info.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	return fromBuildInfo(Version, bi, ok)
}

// fromBuildInfo is Get over explicit inputs (tests give their own).
func fromBuildInfo(stamped string, bi *debug.BuildInfo, ok bool) Info {
	info := Info{Version: stamped, GoVersion: runtime.Version()}
	if !ok || bi == nil {
		if info.Version == "" {
			info.Version = "devel"
		}
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the one-line form the binaries print: "v0.4.0 (commit abc123, go1.26.8)".
func (i Info) String() string {
	s := i.Version + " ("
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += "commit " + rev
		if i.Modified {
			s += "+modified"
		}
		s += ", "
	}
	return s + i.GoVersion + ")"
}
