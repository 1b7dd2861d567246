package adaptertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// memStore is a fake system of record: an in-memory table. A fake is right
// here and only here: the code under test is the kit itself, and a map lets
// the test put the "system of record" into every state directly. Real
// adapters run the kit against their real system of record.
type memStore struct {
	mu       sync.Mutex
	rows     []sdk.Record
	down     bool
	password string
	next     int
	// flaw makes the adapter misbehave in one way the kit must catch.
	flaw string
	// bulkTimeouts is how many bulk reads (more than a thousand rows)
	// still report their deadline passed, as on a loaded machine: safe,
	// and the kit must try again.
	bulkTimeouts int
}

func (s *memStore) write(patient, stamp string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	s.rows = append(s.rows, sdk.Record{"id": int64(s.next), "patient_id": patient, "type": "Triage", "updated_at": stamp})
	return strconv.Itoa(s.next)
}

// memAdapter reads memStore. It returns every row of the configured type
// (options.type, a glob pattern bound from the run's option_params),
// whatever the selector, so the kit's "wrong entity is distinguishable"
// path is exercised.
type memAdapter struct {
	store    *memStore
	password string
	pattern  string
	cached   []sdk.Record
}

type memOptions struct {
	// Type is nil when the section sets none (every type is read); an
	// empty type is a type too, which matches only itself.
	Type *string `json:"type"`
}

// globValue is the memory adapter's own place: a literal inside a
// path.Match pattern, where * ? [ ] and \ are escaped.
var globValue = param.Place{Where: "in the type pattern", Escape: func(v string) (string, error) {
	var b strings.Builder
	for _, r := range v {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String(), nil
}}

func (a *memAdapter) Info() sdk.Info {
	return sdk.Info{Kind: "memory", Tier: sdk.TierIndependentSystem, Description: "in-memory fake for the kit's own test"}
}

func (a *memAdapter) Configure(ctx context.Context, req sdk.ConfigureRequest) error {
	var sec sdk.Section[memOptions]
	if err := json.Unmarshal(req.Config, &sec); err != nil {
		return &refusal.Error{Message: err.Error()}
	}
	a.pattern = "*"
	if t := sec.Options.Type; t != nil {
		a.pattern = *t
		if a.store.flaw != "unescaped" {
			var err error
			if a.pattern, err = globValue.Bind(*t); err != nil {
				return &refusal.Error{Path: "options.type", Message: err.Error()}
			}
		}
	}
	if a.store.flaw == "wrong-slot" {
		// The slot's name as the deployment writes it, which the daemon
		// never sends: the kit must catch it.
		a.password = req.Secrets["password"]
		return nil
	}
	a.password, _ = req.Secret("password")
	return nil
}

func (a *memAdapter) TestConnection(ctx context.Context, _ sdk.TestRequest) (sdk.TestResult, error) {
	if why := a.unreachable(); why != "" {
		if a.store.flaw == "error-on-outage" {
			return sdk.TestResult{}, fmt.Errorf("%s", why)
		}
		return sdk.TestResult{Message: why}, nil
	}
	return sdk.TestResult{Reachable: true, Message: "ok"}, nil
}

func (a *memAdapter) unreachable() string {
	a.store.mu.Lock()
	defer a.store.mu.Unlock()
	if a.store.down {
		return "store is down"
	}
	if a.password != a.store.password {
		return "authentication failed"
	}
	return ""
}

func (a *memAdapter) CaptureBefore(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return a.read(req)
}

func (a *memAdapter) CaptureAfter(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	if a.store.flaw == "cache-after" && a.cached != nil {
		return sdk.Capture{Reachable: true, Records: sdk.Records(a.cached...)}, nil
	}
	c, err := a.read(req)
	if a.store.flaw == "cache-after" && c.Reachable {
		a.cached = []sdk.Record{}
		for r, err := range c.Records {
			if err != nil {
				return sdk.Capture{}, err
			}
			a.cached = append(a.cached, r)
		}
		c.Records = sdk.Records(a.cached...)
	}
	return c, err
}

func (a *memAdapter) read(req sdk.CaptureRequest) (sdk.Capture, error) {
	if why := a.unreachable(); why != "" {
		switch a.store.flaw {
		case "error-on-outage":
			return sdk.Capture{}, fmt.Errorf("%s", why)
		case "empty-on-outage":
			return sdk.Capture{Reachable: true}, nil
		}
		return sdk.Unreachable("%s", why), nil
	}
	a.store.mu.Lock()
	var rows []sdk.Record
	for _, r := range a.store.rows {
		if ok, _ := path.Match(a.pattern, fmt.Sprint(r["type"])); ok {
			rows = append(rows, r)
		}
	}
	slow := len(rows) > 1000 && a.store.bulkTimeouts > 0
	if slow {
		a.store.bulkTimeouts--
	}
	a.store.mu.Unlock()
	switch {
	case slow:
		return sdk.Unreachable("the read did not finish before its deadline"), nil
	case len(rows) > 1000 && a.store.flaw == "empty-when-slow":
		return sdk.Capture{Reachable: true, At: time.Now()}, nil
	case a.store.flaw == "dedupe":
		rows = dedupe(rows)
	}
	rows, err := a.shape(req, rows)
	if err != nil {
		return sdk.Unshapeable(err), nil
	}
	return sdk.Capture{Reachable: true, At: time.Now(), Records: sdk.Records(rows...)}, nil
}

// shape turns the store's multi-valued fields ([]string, as an LDAP
// attribute) into the single value the adapter offers: a field a contract
// reads with several values fails the read. Flaw "absent-when-multivalued"
// follows the rule the SDK once documented instead, leaving the field out.
func (a *memAdapter) shape(req sdk.CaptureRequest, rows []sdk.Record) ([]sdk.Record, error) {
	out := make([]sdk.Record, len(rows))
	for i, r := range rows {
		rec := make(sdk.Record, len(r))
		for f, v := range r {
			values, multi := v.([]string)
			if !multi {
				rec[f] = v
				continue
			}
			one, ok, err := sdk.SingleValue(fmt.Sprint(r["id"]), f, values)
			switch {
			case err != nil && a.store.flaw == "absent-when-multivalued":
			case err != nil && req.Reads(f):
				return nil, err
			case err != nil:
				rec[f] = values
			case ok:
				rec[f] = one
			}
		}
		out[i] = rec
	}
	return out, nil
}

// dedupe drops rows whose content, identity aside, repeats an earlier row:
// the mistake of a "helpful" adapter that hides a double submit.
func dedupe(rows []sdk.Record) []sdk.Record {
	seen := map[string]bool{}
	var out []sdk.Record
	for _, r := range rows {
		key := fmt.Sprint(r["patient_id"], r["type"], r["updated_at"])
		if !seen[key] {
			seen[key] = true
			out = append(out, r)
		}
	}
	return out
}

func memHarness(flaw string) adaptertest.Harness {
	store := &memStore{password: "right-password", flaw: flaw}
	now := func() string { return time.Now().UTC().Format(time.RFC3339) }
	const fixed = "2026-01-01T00:00:00Z"
	stale := "2001-02-03T04:05:06Z"
	if flaw == "generalized-time" {
		stale = "20010203040506Z" // LDAP's own format, yielded unconverted
	}
	const doc = `
effects:
  kind: memory
  option_params: {type: {param: visit_type}}
  secret_env: {password: MEMORY_PASSWORD}
`
	return adaptertest.Harness{
		Factory: func() sdk.Adapter { return &memAdapter{store: store} },
		Deployment: func(t *testing.T) adaptertest.Deployment {
			return adaptertest.Deployment{YAML: doc, Env: map[string]string{"MEMORY_PASSWORD": "right-password"}}
		},
		BadDeployment: func(t *testing.T) adaptertest.Deployment {
			return adaptertest.Deployment{YAML: doc, Env: map[string]string{"MEMORY_PASSWORD": "wrong-password"}}
		},
		Params:   map[string]string{"visit_type": "Triage"},
		Selector: map[string]string{"patient_id": "p1", "type": "Triage"},
		Reset: func(t *testing.T) {
			store.mu.Lock()
			defer store.mu.Unlock()
			store.rows = nil
		},
		WriteCorrect:     func(t *testing.T) string { return store.write("p1", fixed) },
		WriteWrongEntity: func(t *testing.T) string { return store.write("p2", fixed) },
		WriteDuplicate:   func(t *testing.T) string { return store.write("p1", fixed) },
		WriteStale: func(t *testing.T) (string, string) {
			store.write("p1", stale)
			return "updated_at", stale
		},
		WriteLater: func(t *testing.T, d time.Duration) {
			time.AfterFunc(d, func() { store.write("p1", now()) })
		},
		SetReachable: func(t *testing.T, up bool) {
			store.mu.Lock()
			defer store.mu.Unlock()
			store.down = !up
		},
		SeedMany: func(t *testing.T, n int) {
			for range n {
				store.write("p1", fixed)
			}
		},
		WriteUnshapeable: func(t *testing.T) string {
			store.write("p1", fixed)
			store.mu.Lock()
			defer store.mu.Unlock()
			// Two values of an attribute the adapter offers as one.
			store.rows[len(store.rows)-1]["ward"] = []string{"A", "B"}
			return "ward"
		},
	}
}

func TestKitInProcess(t *testing.T) {
	adaptertest.Run(t, memHarness(""))
}

// TestKitRetriesBulkReadPastItsDeadline qualifies an adapter whose first
// bulk read report their deadline passed (unreachable, as on a loaded
// machine): the kit reads again with more time, and the adapter passes.
func TestKitRetriesBulkReadPastItsDeadline(t *testing.T) {
	h := memHarness("")
	var store *memStore
	factory := h.Factory
	h.Factory = func() sdk.Adapter {
		a := factory().(*memAdapter)
		store = a.store
		return a
	}
	// The store is shared by every instance; reach it through one.
	h.Factory()
	store.bulkTimeouts = 1
	adaptertest.Run(t, h)
	if store.bulkTimeouts != 0 {
		t.Errorf("%d bulk reads past their deadline were never made; the kit did not read in bulk", store.bulkTimeouts)
	}
}

// testPlugin is sdk/internal/testplugin, built once by TestMain; its "file"
// mode reads a JSON-lines file, a small real system of record.
var testPlugin string

func TestMain(m *testing.M) {
	if os.Getenv("ADAPTERTEST_FLAW") != "" {
		// A child run of TestKitFlawChild needs no plugin binary.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "adaptertest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testPlugin = filepath.Join(dir, "testplugin")
	build := exec.Command("go", "build", "-o", testPlugin, "github.com/verifierd/verifierd/sdk/internal/testplugin")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the test plugin:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fileStore is the JSON-lines file the test plugin reads.
type fileStore struct {
	mu   sync.Mutex
	path string
	next int
}

func (f *fileStore) append(t *testing.T, rows ...map[string]any) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	file, err := os.OpenFile(f.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer file.Close()
	var b strings.Builder
	var ids []string
	for _, r := range rows {
		f.next++
		r["id"] = f.next
		line, _ := json.Marshal(r)
		b.Write(line)
		b.WriteByte('\n')
		ids = append(ids, strconv.Itoa(f.next))
	}
	if _, err := file.WriteString(b.String()); err != nil {
		t.Error(err)
	}
	return ids
}

func row(patient, stamp string) map[string]any {
	return map[string]any{"patient_id": patient, "type": "Triage", "updated_at": stamp}
}

func TestKitSubprocess(t *testing.T) {
	dir := t.TempDir()
	fs := &fileStore{path: filepath.Join(dir, "records.jsonl")}
	if err := os.WriteFile(fs.path+".password", []byte("right-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The section as an operator writes it: the plugin's own top-level
	// keys, and its secret declared under secret_env.
	config := func(password string) adaptertest.Deployment {
		doc := fmt.Sprintf("effects:\n  kind: testplugin\n  mode: file\n  path: %q\n  secret_env: {password: TESTPLUGIN_PASSWORD}\n  freshness_field: updated_at\n  freshness_window_s: 60\n", fs.path)
		return adaptertest.Deployment{YAML: doc, Env: map[string]string{"TESTPLUGIN_PASSWORD": password}}
	}
	const fixed = "2026-01-01T00:00:00Z"
	adaptertest.Run(t, adaptertest.Harness{
		Binary:        testPlugin,
		Deployment:    func(t *testing.T) adaptertest.Deployment { return config("right-password") },
		BadDeployment: func(t *testing.T) adaptertest.Deployment { return config("wrong-password") },
		Selector:      map[string]string{"patient_id": "p1", "type": "Triage"},
		Reset: func(t *testing.T) {
			fs.mu.Lock()
			defer fs.mu.Unlock()
			if err := os.WriteFile(fs.path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		WriteCorrect:     func(t *testing.T) string { return fs.append(t, row("p1", fixed))[0] },
		WriteWrongEntity: func(t *testing.T) string { return fs.append(t, row("p2", fixed))[0] },
		WriteDuplicate:   func(t *testing.T) string { return fs.append(t, row("p1", fixed))[0] },
		WriteStale: func(t *testing.T) (string, string) {
			fs.append(t, row("p1", "2001-02-03T04:05:06Z"))
			return "updated_at", "2001-02-03T04:05:06Z"
		},
		WriteLater: func(t *testing.T, d time.Duration) {
			time.AfterFunc(d, func() { fs.append(t, row("p1", fixed)) })
		},
		SetReachable: func(t *testing.T, up bool) {
			if up {
				os.Remove(fs.path + ".down")
			} else if err := os.WriteFile(fs.path+".down", nil, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		SeedMany: func(t *testing.T, n int) {
			rows := make([]map[string]any, n)
			for i := range rows {
				rows[i] = row("p1", fixed)
			}
			fs.append(t, rows...)
		},
	})
}

// The kit must be able to fail: each flawed adapter is qualified in a child
// test process, which must fail with the kit's explanation.
func TestKitCatchesFlawedAdapters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		flaw string
		want string
	}{
		{"dedupe", "duplicates must never be collapsed"},
		{"error-on-outage", "must be Reachable=false, not an error"},
		{"empty-on-outage", "an empty read would look like a missing write"},
		{"cache-after", "must read afresh every time"},
		{"wrong-slot", "the working system of record was reported unreachable: authentication failed"},
		{"unescaped", "the value reshaped the read"},
		{"generalized-time", "cannot be read by the judge's freshness check"},
		{"absent-when-multivalued", "field ward the adapter cannot shape was written, and the read succeeded"},
		{"empty-when-slow", "read as a SUCCESSFUL EMPTY read"},
	}
	for _, tc := range tests {
		t.Run(tc.flaw, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestKitFlawChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "ADAPTERTEST_FLAW="+tc.flaw)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the kit passed an adapter with flaw %q:\n%s", tc.flaw, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("the kit failed flaw %q without saying %q:\n%s", tc.flaw, tc.want, out)
			}
		})
	}
}

func TestKitFlawChild(t *testing.T) {
	flaw := os.Getenv("ADAPTERTEST_FLAW")
	if flaw == "" {
		t.Skip("run by TestKitCatchesFlawedAdapters in a child process")
	}
	adaptertest.Run(t, memHarness(flaw))
}
