package runs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
)

// The harness of the runs tests: an in-memory adapter and table (as
// internal/session's tests have them) and a Manager over real parts (the
// plugin host, a bolt store) with the runs service attached.

// docKind is the kind the tests' document stores are served under: a
// kind VerifyArtifact reads (document-hash), in process, at that built-in
// kind's tier.
const docKind = "document-hash"

// memAdapter is a test adapter over an in-memory table. It stands in for
// the system of record a run's steps write to and its document store.
type memAdapter struct {
	kind  string
	tier  sdk.Tier
	table *table
	// afterRead, when set, runs after the n-th after read (from 1): a
	// synchronisation point for a change landing between two reads.
	afterRead func(n int)
	after     atomic.Int32
}

type table struct {
	mu          sync.Mutex
	rows        []sdk.Record
	unreachable bool
}

func (t *table) add(r sdk.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows = append(t.rows, r)
}

func (a *memAdapter) Info() sdk.Info { return sdk.Info{Kind: a.kind, Tier: a.tier} }

func (a *memAdapter) Configure(context.Context, sdk.ConfigureRequest) error { return nil }

func (a *memAdapter) TestConnection(context.Context, sdk.TestRequest) (sdk.TestResult, error) {
	return sdk.TestResult{Reachable: true, Message: "memory"}, nil
}

func (a *memAdapter) read() (sdk.Capture, error) {
	a.table.mu.Lock()
	defer a.table.mu.Unlock()
	if a.table.unreachable {
		return sdk.Unreachable("table offline"), nil
	}
	return sdk.Capture{Reachable: true, Records: sdk.Records(append([]sdk.Record(nil), a.table.rows...)...)}, nil
}

func (a *memAdapter) CaptureBefore(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	return a.read()
}

func (a *memAdapter) CaptureAfter(context.Context, sdk.CaptureRequest) (sdk.Capture, error) {
	c, err := a.read()
	if a.afterRead != nil {
		a.afterRead(int(a.after.Add(1)))
	}
	return c, err
}

// newHost is a plugin host serving adapters in process.
func newHost(t *testing.T, adapters ...sdk.Adapter) *pluginhost.Host {
	t.Helper()
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range adapters {
		host.RegisterInProcess(a.Info().Kind, func() sdk.Adapter { return a })
	}
	t.Cleanup(host.Close)
	return host
}

// newManager builds a Manager over a fresh bolt store with in-process
// adapters, the registered deployments of daemon and workflows wfs, and
// the runs service attached.
func newManager(t *testing.T, daemon *config.Daemon, wfs map[string]*workflow.Workflow, signer *signing.Signer, adapters ...sdk.Adapter) (*session.Manager, store.Backend) {
	t.Helper()
	st, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return mustNew(t, session.Options{Host: newHost(t, adapters...), Store: st, Daemon: daemon, Workflows: wfs, Signer: signer, PollInterval: 5 * time.Millisecond}), st
}

// mustNew is session.New with the runs service attached.
func mustNew(t *testing.T, o session.Options) *session.Manager {
	t.Helper()
	m, err := session.New(o)
	if err != nil {
		t.Fatal(err)
	}
	For(m)
	return m
}

// writeDeployment writes a registered deployment file and returns its path.
func writeDeployment(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "deployment.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantRefusal(t *testing.T, err error, kind session.ErrorKind, code, path string) {
	t.Helper()
	var se *session.Error
	if !errors.As(err, &se) || se.Kind != kind || se.Code != code || se.Path != path {
		t.Fatalf("err = %#v (%v); want kind %d, code %q, path %q", se, err, kind, code, path)
	}
}

// storedMeta is what the tests read of a stored session: its parameters
// and its run binding.
type storedMeta struct {
	Params map[string]string   `json:"params"`
	Run    *receipt.RunBinding `json:"run"`
}

// A session Begin with a run_id is refused as invalid on a Manager with
// no runs service attached, and nothing is begun; once one is attached
// (For) it is a step of a run, checked by the runs service.
func TestBeginInRunNeedsTheRunsService(t *testing.T) {
	t.Parallel()
	st, err := bolt.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m, err := session.New(session.Options{Host: newHost(t), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	_, err = m.Begin(ctx, session.BeginRequest{RunID: "r1", Step: "intake"})
	wantRefusal(t, err, session.Invalid, "", "run_id")
	n := 0
	if err := st.ForEachSession(ctx, func(string, []byte, []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("sessions stored = %d (%v); want none", n, err)
	}
	For(m)
	_, err = m.Begin(ctx, session.BeginRequest{RunID: "r1", Step: "intake"})
	wantRefusal(t, err, session.NotFound, "", "run_id")
}
