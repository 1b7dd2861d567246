package version

import (
	"runtime/debug"
	"testing"
)

func TestStampedVersionWins(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	got := fromBuildInfo("v0.4.0", bi, true)
	if got.Version != "v0.4.0" || got.Revision != "0123456789abcdef0123" || !got.Modified || got.GoVersion != "go1.26.8" {
		t.Fatalf("fromBuildInfo = %+v", got)
	}
	if s := got.String(); s != "v0.4.0 (commit 0123456789ab+modified, go1.26.8)" {
		t.Fatalf("String() = %q", s)
	}
}

func TestModuleVersionWithoutStamp(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.4.0"}}
	if got := fromBuildInfo("", bi, true); got.Version != "v0.4.0" || got.Revision != "" {
		t.Fatalf("fromBuildInfo = %+v", got)
	}
}

func TestDevelWithoutVersion(t *testing.T) {
	for _, bi := range []*debug.BuildInfo{{Main: debug.Module{Version: "(devel)"}}, nil} {
		if got := fromBuildInfo("", bi, bi != nil); got.Version != "devel" {
			t.Fatalf("fromBuildInfo(%v) = %+v, want devel", bi, got)
		}
	}
}
