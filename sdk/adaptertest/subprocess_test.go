package adaptertest_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/unstable/host"
)

// TestSubprocess: Subprocess starts the binary as the daemon does (an
// environment of exactly env), the instance it returns configures and reads
// through the real client, Pid names the live process, and Crash kills it,
// after which a call fails as a shutdown, not as an empty read.
func TestSubprocess(t *testing.T) {
	t.Parallel()
	in := adaptertest.Subprocess(t, testPlugin, "ONLY_THIS=1")
	pid := in.Pid()
	if pid <= 0 {
		t.Fatalf("Pid = %d; want the plugin's process id", pid)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("process %d is not running: %v", pid, err)
	}
	info, err := in.GetInfo(t.Context())
	if err != nil || info.Kind != "testplugin" || !slices.Contains(info.APIVersions, sdk.APIVersion) {
		t.Fatalf("GetInfo = %+v, %v; want kind testplugin speaking %s", info, err, sdk.APIVersion)
	}
	if err := in.Setup(t.Context(), sdk.ConfigureRequest{Kind: "testplugin", Config: json.RawMessage(`{"mode":"synthetic"}`)}, nil); err != nil {
		t.Fatal(err)
	}
	_, recs := adaptertest.ReadAll(t, in, true, adaptertest.Request(map[string]string{"mode": "env"}))
	var names []string
	for _, r := range recs {
		if n, ok := r["name"].(string); ok {
			names = append(names, n)
		}
	}
	if !slices.Contains(names, "ONLY_THIS") {
		t.Errorf("the plugin's environment %v lacks ONLY_THIS, which Subprocess was given", names)
	}
	for _, n := range names {
		if n != "ONLY_THIS" && !strings.HasPrefix(n, "PLUGIN_") && !strings.HasPrefix(n, "VERIFIERD_ADAPTER_") {
			t.Errorf("the plugin inherited %s; its environment must be exactly what Subprocess was given", n)
		}
	}

	in.Crash()
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := in.TestConnection(t.Context()); !errors.Is(err, host.ErrPluginShutdown) {
		t.Errorf("a call after Crash returned %v; want an error wrapping host.ErrPluginShutdown", err)
	}
}
