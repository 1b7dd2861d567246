package adaptertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/unstable/host"
	"github.com/verifierd/verifierd/sdk/unstable/timestamp"
)

// Harness describes an adapter and the system of record it reads. Every hook
// is required (WriteUnshapeable only where the system can hold such a
// record; see there): a missing one fails the run, because an adapter that
// was not shown each hazard has not qualified.
type Harness struct {
	// Binary is the adapter's plugin binary. When set, the kit runs it as a
	// go-plugin subprocess exactly as the daemon does (handshake, AutoMTLS,
	// an environment of Env only). When empty, Factory runs in process.
	Binary  string
	Env     []string
	Factory func() sdk.Adapter

	// Deployment configures the adapter against the working system of
	// record, with the right credentials, from what an operator writes:
	// a deployment document and the daemon's environment, which the kit
	// resolves with the daemon's own code (sdk/unstable/deployment) into the
	// ConfigureRequest the daemon would send, Params bound into its
	// option_params. Set it, or Config.
	Deployment func(t *testing.T) Deployment
	// BadDeployment is Deployment with credentials the system of record
	// refuses (see BadCredentials). Set it with Deployment.
	BadDeployment func(t *testing.T) Deployment
	// Config is Deployment's ConfigureRequest built by hand. It qualifies
	// nothing about the section's shape or its secret slots (a request
	// built by hand can carry a slot the daemon never sends); prefer
	// Deployment.
	Config func(t *testing.T) sdk.ConfigureRequest
	// Params are the run parameters every call carries (the session's
	// bound values for the section's {param} references); nil for none.
	// The kit also replaces each by nothing and by HostileValues.
	Params map[string]string
	// BadCredentials is Config with credentials the system of record
	// refuses. Configure must accept it (a refusal is only for a malformed
	// section); the captures must then report the system as unreachable.
	BadCredentials func(t *testing.T) sdk.ConfigureRequest

	// Selector is the bound selector of the effect under test, naming one
	// entity; IdentityField names the field that identifies a record ("id"
	// when empty).
	Selector      map[string]string
	IdentityField string

	// Reset leaves no record matching Selector (other records may stay).
	Reset func(t *testing.T)
	// WriteCorrect writes one record matching Selector, as the automation
	// would, and returns its identity.
	WriteCorrect func(t *testing.T) string
	// WriteWrongEntity writes one record of the same shape for another
	// entity (a Selector field holds another value) and returns its
	// identity.
	WriteWrongEntity func(t *testing.T) string
	// WriteDuplicate writes one more record matching Selector, as a double
	// submit would (same content, its own identity), and returns its
	// identity.
	WriteDuplicate func(t *testing.T) string
	// WriteStale writes one record matching Selector whose timestamp field
	// is long past (more than a day), and returns the field's name and the
	// value the adapter must read back: the stored text, or its RFC 3339
	// form when the adapter converts the system's own format (the judge
	// reads only epoch seconds and RFC 3339 / ISO 8601, sdk/unstable/timestamp).
	WriteStale func(t *testing.T) (field, value string)
	// WriteLater starts writing one record matching Selector that lands
	// after delay, and returns at once.
	WriteLater func(t *testing.T, delay time.Duration)
	// SetReachable takes the system of record down (false) or brings it
	// back (true).
	SetReachable func(t *testing.T, reachable bool)
	// SeedMany writes n records matching Selector, each its own identity.
	// Not used with OneRecord.
	SeedMany func(t *testing.T, n int)
	// WriteUnshapeable writes one record matching Selector that the
	// adapter cannot shape as a contract reads it (an LDAP entry with two
	// values of an attribute the adapter offers as single-valued, a JSON
	// array where the adapter reads a scalar), and returns that field's
	// name. The kit reads with the field among the request's ReadFields;
	// the read must fail (Reachable=false, sdk.Unshapeable) with a reason
	// naming the field, never drop the record or keep one of its values.
	// Leave it nil only when the system's own schema makes every field the
	// adapter offers hold exactly one value (a SQL column); the case is
	// then skipped, saying so.
	WriteUnshapeable func(t *testing.T) (field string)

	// OneRecord declares an adapter whose mechanism reads at most one
	// record per capture (a screen showing one record page). The kit then
	// checks that a double submit reads as that one record (the duplicate
	// is invisible to such a mechanism, a limit its documentation must
	// state), skips the many-records stream, and kills the adapter while
	// its one-record read streams.
	OneRecord bool
}

// ManyRecords is how many records SeedMany is asked for: enough to span
// dozens of batches, so a capture streams and a crash can land inside it.
const ManyRecords = 50_000

// LateWrite is the delay given to WriteLater.
const LateWrite = time.Second

// ManyRecordsTimeout is the timeout of the first attempt at a bulk read
// (many_records_stream, crash_mid_capture). An attempt that the adapter
// reports unreachable (its deadline passed on a loaded machine: safe) is
// made again with twice the timeout, up to BulkAttempts attempts and
// while the test's own deadline leaves room.
const ManyRecordsTimeout = 2 * time.Minute

// BulkAttempts is how many times a bulk read is attempted before the kit
// fails it as unreachable.
const BulkAttempts = 3

// AnswerGrace is how long past a capture's Timeout the kit still waits for
// the adapter's answer: an adapter that runs out of time answers
// unreachable at its Timeout, and on a loaded machine that answer takes a
// moment to arrive. A call cut off by the kit's own deadline instead fails
// the case.
const AnswerGrace = 30 * time.Second

// Run qualifies the adapter described by h. Subtests run in order and share
// the system of record, so they are not parallel.
func Run(t *testing.T, h Harness) {
	t.Helper()
	h.check(t)
	if h.Deployment != nil {
		params := h.Params
		good, bad := h.Deployment, h.BadDeployment
		h.Config = func(t *testing.T) sdk.ConfigureRequest { return good(t).Request(t, params) }
		h.BadCredentials = func(t *testing.T) sdk.ConfigureRequest { return bad(t).Request(t, params) }
	}
	if h.IdentityField == "" {
		h.IdentityField = "id"
	}
	k := &kit{h: h}

	t.Run("info", k.info)
	t.Run("configure_and_test_connection", k.configure)
	t.Run("empty_read", k.empty)
	t.Run("correct_write", k.correctWrite)
	t.Run("wrong_entity", k.wrongEntity)
	t.Run("duplicate_rows", k.duplicates)
	t.Run("stale_row", k.stale)
	t.Run("hostile_params", k.hostileParams)
	t.Run("settles_later", k.settlesLater)
	t.Run("bad_credentials_unreachable", k.badCredentials)
	t.Run("unreachable_before", k.unreachableBefore)
	t.Run("unreachable_after", k.unreachableAfter)
	t.Run("unshapeable_record", k.unshapeable)
	t.Run("many_records_stream", k.many)
	t.Run("crash_mid_capture", k.crash)
	t.Run("instances_and_release", k.instances)
}

func (h Harness) check(t *testing.T) {
	t.Helper()
	for _, hook := range []struct {
		name    string
		missing bool
	}{
		{"Binary or Factory", h.Binary == "" && h.Factory == nil},
		{"Deployment (or Config)", h.Config == nil && h.Deployment == nil},
		{"BadDeployment (with Deployment)", h.Deployment != nil && h.BadDeployment == nil},
		{"BadCredentials (with Config)", h.Config != nil && h.BadCredentials == nil},
		{"Selector", len(h.Selector) == 0},
		{"Reset", h.Reset == nil},
		{"WriteCorrect", h.WriteCorrect == nil},
		{"WriteWrongEntity", h.WriteWrongEntity == nil},
		{"WriteDuplicate", h.WriteDuplicate == nil},
		{"WriteStale", h.WriteStale == nil},
		{"WriteLater", h.WriteLater == nil},
		{"SetReachable", h.SetReachable == nil},
		{"SeedMany", h.SeedMany == nil && !h.OneRecord},
	} {
		if hook.missing {
			t.Fatalf("adaptertest: Harness.%s is required", hook.name)
		}
	}
	if h.Config != nil && h.Deployment != nil {
		t.Fatal("adaptertest: set Harness.Deployment or Harness.Config, not both")
	}
}

type kit struct {
	h    Harness
	runs int
}

// running is one configured adapter instance behind the real plugin client.
type running struct {
	host.Client
	id     string
	params map[string]string
	kill   func() // abrupt death, as a crash
}

func (r *running) test(ctx context.Context) (sdk.TestResult, error) {
	return r.TestConnection(ctx, r.id, sdk.TestRequest{Params: r.params})
}

func (r *running) before(ctx context.Context, req sdk.CaptureRequest) (*host.Stream, error) {
	req.Params = r.params
	return r.CaptureBefore(ctx, r.id, req)
}

func (r *running) after(ctx context.Context, req sdk.CaptureRequest) (*host.Stream, error) {
	req.Params = r.params
	return r.CaptureAfter(ctx, r.id, req)
}

// start runs a fresh adapter instance and configures it with cfg.
func (k *kit) start(t *testing.T, cfg sdk.ConfigureRequest) *running {
	return k.startAs(t, cfg, "Configure")
}

// startAs is start with the name of the configuration in failure messages.
func (k *kit) startAs(t *testing.T, cfg sdk.ConfigureRequest, what string) *running {
	t.Helper()
	var in *Instance
	if k.h.Binary != "" {
		in = Subprocess(t, k.h.Binary, k.h.Env...)
	} else {
		in = InProcess(t, k.h.Factory)
	}
	r := &running{Client: in.process, kill: in.Crash}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	id, err := r.Configure(ctx, cfg)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if id == "" {
		t.Fatalf("%s: the adapter accepted the configuration without an instance id", what)
	}
	r.id, r.params = id, k.h.Params
	return r
}

func (k *kit) req() sdk.CaptureRequest {
	k.runs++
	return sdk.CaptureRequest{
		CaptureID:     "adaptertest-" + strconv.Itoa(k.runs),
		Selector:      k.h.Selector,
		IdentityField: k.h.IdentityField,
		Timeout:       30 * time.Second,
		EffectKind:    "record_written",
	}
}

// read is one complete capture.
type read struct {
	reachable bool
	reason    string
	at        time.Time
	records   []sdk.Record
}

// capture reads through r and fails the test on any error: in the kit's
// scenarios every outcome, outages included, must be data.
func (k *kit) capture(t *testing.T, r *running, after bool) read {
	t.Helper()
	return k.captureWithin(t, r, after, 0)
}

// captureWithin is capture with the request's timeout set to timeout (0:
// the kit's default).
func (k *kit) captureWithin(t *testing.T, r *running, after bool, timeout time.Duration) read {
	t.Helper()
	req := k.req()
	if timeout > 0 {
		req.Timeout = timeout
	}
	return k.captureReq(t, r, after, req)
}

// captureReq is capture with the request req.
func (k *kit) captureReq(t *testing.T, r *running, after bool, req sdk.CaptureRequest) read {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), req.Timeout+AnswerGrace)
	defer cancel()
	which, call := "CaptureBefore", r.before
	if after {
		which, call = "CaptureAfter", r.after
	}
	c, err := call(ctx, req)
	if err != nil {
		t.Fatalf("%s returned an error; an outage or a refusal must be Reachable=false, not an error: %v", which, err)
	}
	recs, err := c.Records()
	if err != nil {
		t.Fatalf("%s: reading its records: %v", which, err)
	}
	if !c.Reachable && len(recs) > 0 {
		t.Fatalf("%s: an unreachable read carried %d records", which, len(recs))
	}
	return read{reachable: c.Reachable, reason: c.Reason, at: c.At, records: recs}
}

func (k *kit) mustReach(t *testing.T, rd read, which string) {
	t.Helper()
	if !rd.reachable {
		t.Fatalf("%s: the working system of record was reported unreachable: %s", which, rd.reason)
	}
}

// matching returns the records that match the Selector, and checks that
// each has an identity.
func (k *kit) matching(t *testing.T, rd read) []sdk.Record {
	t.Helper()
	var out []sdk.Record
	for _, r := range rd.records {
		if !matches(r, k.h.Selector) {
			continue
		}
		if _, ok := text(r[k.h.IdentityField]); !ok {
			t.Errorf("record %v matches the selector but has no %q identity field", r, k.h.IdentityField)
		}
		out = append(out, r)
	}
	return out
}

func (k *kit) identities(rs []sdk.Record) []string {
	var ids []string
	for _, r := range rs {
		id, _ := text(r[k.h.IdentityField])
		ids = append(ids, id)
	}
	return ids
}

func (k *kit) info(t *testing.T) {
	r := k.start(t, k.h.Config(t))
	info, err := r.GetInfo(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind == "" {
		t.Error("Info.Kind is empty")
	}
	if !info.Tier.Valid() {
		t.Errorf("Info.Tier = %d; want 1 to 4", info.Tier)
	}
	if _, err := host.NegotiateAPIVersion(info.APIVersions); err != nil {
		t.Error(err)
	}
}

func (k *kit) configure(t *testing.T) {
	r := k.start(t, k.h.Config(t))
	res, err := r.test(t.Context())
	if err != nil {
		t.Fatalf("TestConnection: %v", err)
	}
	if !res.Reachable {
		t.Fatalf("TestConnection against the working system of record: unreachable: %s", res.Message)
	}
}

func (k *kit) empty(t *testing.T) {
	r := k.start(t, k.h.Config(t))
	k.h.Reset(t)
	before := time.Now()
	rd := k.capture(t, r, false)
	k.mustReach(t, rd, "CaptureBefore")
	if n := len(k.matching(t, rd)); n != 0 {
		t.Errorf("after Reset, %d records match the selector; want 0", n)
	}
	if rd.at.IsZero() || rd.at.Before(before.Add(-time.Minute)) || rd.at.After(time.Now().Add(time.Minute)) {
		t.Errorf("capture time %v is not the time of the read (%v)", rd.at, before)
	}
}

func (k *kit) correctWrite(t *testing.T) {
	r := k.start(t, k.h.Config(t))
	k.h.Reset(t)
	k.mustReach(t, k.capture(t, r, false), "CaptureBefore")
	id := k.h.WriteCorrect(t)
	got := k.identities(k.matching(t, k.capture(t, r, true)))
	if len(got) != 1 || got[0] != id {
		t.Errorf("after one correct write, records matching the selector have identities %q; want [%q]", got, id)
	}
}

func (k *kit) wrongEntity(t *testing.T) {
	r := k.start(t, k.h.Config(t))
	k.h.Reset(t)
	wrong := k.h.WriteWrongEntity(t)
	rd := k.capture(t, r, true)
	k.mustReach(t, rd, "CaptureAfter")
	if n := len(k.matching(t, rd)); n != 0 {
		t.Errorf("a write for another entity shows as %d records matching the selector; want 0", n)
	}
	for _, rec := range rd.records {
		if id, _ := text(rec[k.h.IdentityField]); id == wrong && matches(rec, k.h.Selector) {
			t.Errorf("the wrong entity's record %v is indistinguishable from the selected one", rec)
		}
	}
	id := k.h.WriteCorrect(t)
	got := k.identities(k.matching(t, k.capture(t, r, true)))
	if len(got) != 1 || got[0] != id {
		t.Errorf("with a wrong-entity record present, one correct write reads as %q; want [%q]", got, id)
	}
}

func (k *kit) duplicates(t *testing.T) {
	r := k.start(t, k.h.Config(t))
	k.h.Reset(t)
	first := k.h.WriteCorrect(t)
	second := k.h.WriteDuplicate(t)
	if k.h.OneRecord {
		got := k.identities(k.matching(t, k.capture(t, r, true)))
		if len(got) != 1 || got[0] != second {
			t.Errorf("a one-record adapter reads a double submit as %q; want the one record %q it shows", got, second)
		}
		return
	}
	if first == second {
		t.Fatalf("WriteDuplicate returned the identity of the first write (%q); a duplicate row has its own", first)
	}
	got := k.identities(k.matching(t, k.capture(t, r, true)))
	if len(got) != 2 || ((got[0] != first || got[1] != second) && (got[0] != second || got[1] != first)) {
		t.Errorf("a double submit reads as %q; want both rows %q and %q (duplicates must never be collapsed)", got, first, second)
	}
}

func (k *kit) stale(t *testing.T) {
	r := k.start(t, k.h.Config(t))
	k.h.Reset(t)
	field, value := k.h.WriteStale(t)
	got := k.matching(t, k.capture(t, r, true))
	if len(got) != 1 {
		t.Fatalf("a stale row reads as %d records matching the selector; want 1 (the judge decides freshness, not the adapter)", len(got))
	}
	if v, ok := text(got[0][field]); !ok || v != value {
		t.Errorf("the stale row's %q reads as %q (present %v); want the stored %q, untouched", field, v, ok, value)
	}
	// The judge's own reading of a timestamp: a shape it refuses would
	// make every freshness window judge the record INDETERMINATE.
	at, err := timestamp.Parse(got[0][field])
	switch {
	case err != nil:
		t.Errorf("the stale row's %q cannot be read by the judge's freshness check: %v; yield RFC 3339 text (2006-01-02T15:04:05Z) or epoch seconds, converting the system's own format", field, err)
	case time.Since(at) < 24*time.Hour:
		t.Errorf("the stale row's %q reads as %v, not long past: WriteStale must write a timestamp more than a day old", field, at)
	}
}

func (k *kit) settlesLater(t *testing.T) {
	r := k.start(t, k.h.Config(t))
	k.h.Reset(t)
	k.mustReach(t, k.capture(t, r, false), "CaptureBefore")
	due := time.Now().Add(LateWrite)
	k.h.WriteLater(t, LateWrite)
	n := len(k.matching(t, k.capture(t, r, true)))
	switch {
	case time.Now().Before(due) && n != 0:
		t.Fatalf("a write due in %v already reads as %d records", LateWrite, n)
	case !time.Now().Before(due):
		// The read ended after the write was due (a slow read on a loaded
		// machine), so it may rightly have seen it: nothing to conclude.
		t.Logf("the first CaptureAfter ended after the write was due; its count (%d) is not checked", n)
	}
	deadline := time.Now().Add(LateWrite + 15*time.Second)
	for {
		start := time.Now()
		n := len(k.matching(t, k.capture(t, r, true)))
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("one capture took %v, past its timeout", took)
		}
		if n == 1 {
			return
		}
		if n > 1 {
			t.Fatalf("the late write reads as %d records; want 1", n)
		}
		if time.Now().After(deadline) {
			t.Fatalf("a write due after %v was still not read %v later: CaptureAfter must read afresh every time", LateWrite, LateWrite+15*time.Second)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (k *kit) badCredentials(t *testing.T) {
	r := k.startAs(t, k.h.BadCredentials(t), "Configure with BadCredentials (wrong credentials are an outage, not a malformed section)")
	k.h.Reset(t)
	k.h.WriteCorrect(t)
	res, err := r.test(t.Context())
	if err != nil {
		t.Errorf("TestConnection with refused credentials returned an error; want Reachable=false: %v", err)
	} else if res.Reachable {
		t.Error("TestConnection with refused credentials reports the system reachable")
	}
	for _, after := range []bool{false, true} {
		rd := k.capture(t, r, after)
		if rd.reachable {
			t.Errorf("capture (after=%v) with refused credentials: reachable with %d records; want Reachable=false", after, len(rd.records))
		} else if rd.reason == "" {
			t.Errorf("capture (after=%v) with refused credentials gives no reason", after)
		}
	}
}

func (k *kit) down(t *testing.T) {
	k.h.SetReachable(t, false)
	t.Cleanup(func() { k.h.SetReachable(t, true) })
}

func (k *kit) unreachableBefore(t *testing.T) {
	r := k.start(t, k.h.Config(t))
	k.h.Reset(t)
	k.down(t)
	if rd := k.capture(t, r, false); rd.reachable {
		t.Errorf("CaptureBefore during an outage: reachable with %d records; want Reachable=false", len(rd.records))
	}
	if res, err := r.test(t.Context()); err != nil || res.Reachable {
		t.Errorf("TestConnection during an outage = %+v, %v; want Reachable=false and no error", res, err)
	}
	k.h.SetReachable(t, true)
	k.mustReach(t, k.capture(t, r, false), "CaptureBefore after the outage")
}

func (k *kit) unreachableAfter(t *testing.T) {
	r := k.start(t, k.h.Config(t))
	k.h.Reset(t)
	k.mustReach(t, k.capture(t, r, false), "CaptureBefore")
	id := k.h.WriteCorrect(t)
	k.down(t)
	if rd := k.capture(t, r, true); rd.reachable {
		t.Errorf("CaptureAfter during an outage: reachable with %d records; want Reachable=false (an empty read would look like a missing write)", len(rd.records))
	}
	k.h.SetReachable(t, true)
	got := k.identities(k.matching(t, k.capture(t, r, true)))
	if len(got) != 1 || got[0] != id {
		t.Errorf("after the outage the write reads as %q; want [%q]", got, id)
	}
}

// unshapeable writes a record the adapter cannot shape next to a correct
// one: the read must fail, naming the field, because a read that drops the
// record (or keeps one of its values) looks like no write at all.
func (k *kit) unshapeable(t *testing.T) {
	if k.h.WriteUnshapeable == nil {
		t.Skip("Harness.WriteUnshapeable is nil: the adapter declares that every field it offers holds exactly one value by the system's own schema")
	}
	r := k.start(t, k.h.Config(t))
	k.h.Reset(t)
	k.mustReach(t, k.capture(t, r, false), "CaptureBefore")
	k.h.WriteCorrect(t)
	field := k.h.WriteUnshapeable(t)
	req := k.req()
	req.ReadFields = []string{k.h.IdentityField, field}
	for f := range k.h.Selector {
		req.ReadFields = append(req.ReadFields, f)
	}
	rd := k.captureReq(t, r, true, req)
	switch {
	case rd.reachable:
		t.Errorf("a record whose field %s the adapter cannot shape was written, and the read succeeded with %d of its records matching the selector: "+
			"an adapter defect. A record a contract reads that cannot be shaped must fail the read (sdk.Unshapeable: Reachable=false, the reason naming the record and the field), "+
			"never be dropped or keep one of its values: a read without it looks like no write and halts the step for a retry", field, len(k.matching(t, rd)))
	case !strings.Contains(rd.reason, field):
		t.Errorf("the read failed, but its reason %q does not name the field %s that could not be shaped", rd.reason, field)
	}
}

// bulk makes a bulk read of the ManyRecords seeded records with attempt,
// which reads within the timeout it is given and reports whether the read
// reached the system of record. An attempt the adapter reports unreachable
// (on a loaded machine, its deadline passed) is made again with twice the
// timeout (BulkAttempts, and the test's deadline, bound them). When none
// reaches, the test fails: unreachable is safe, but the adapter has not
// shown that it reads that many records.
func (k *kit) bulk(t *testing.T, attempt func(timeout time.Duration) (reachable bool, reason string)) {
	t.Helper()
	timeout := ManyRecordsTimeout
	var tries []string
	for range BulkAttempts {
		start := time.Now()
		ok, why := attempt(timeout)
		if ok {
			return
		}
		tries = append(tries, fmt.Sprintf("after %v (timeout %v): %s", time.Since(start).Round(time.Second), timeout, why))
		t.Logf("bulk read attempt %d unreachable %s", len(tries), tries[len(tries)-1])
		timeout *= 2
		if dl, has := t.Deadline(); has && time.Until(dl) < timeout+time.Minute {
			break
		}
	}
	t.Fatalf("the bulk read of %d records was unreachable at every attempt: %s. "+
		"Unreachable is safe (INDETERMINATE), so this is no verdict defect, but the adapter has not shown it reads that many records: "+
		"find what is slow, or raise go test's -timeout for a loaded machine", ManyRecords, strings.Join(tries, "; "))
}

func (k *kit) many(t *testing.T) {
	if k.h.OneRecord {
		t.Skip("Harness.OneRecord: the mechanism reads one record per capture")
	}
	r := k.start(t, k.h.Config(t))
	k.h.Reset(t)
	k.h.SeedMany(t, ManyRecords)
	// A bulk read is given longer than the kit's other reads: 50,000 files
	// over SFTP on a loaded 2-core machine have taken more than 30 s.
	var rd read
	k.bulk(t, func(timeout time.Duration) (bool, string) {
		rd = k.captureWithin(t, r, true, timeout)
		return rd.reachable, rd.reason
	})
	ids := k.identities(k.matching(t, rd))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		seen[id] = true
	}
	switch {
	case len(ids) == 0:
		t.Errorf("%d seeded records read as a SUCCESSFUL EMPTY read (%d records, none matching the selector): an adapter defect. "+
			"A read that was slow, cut off or could not see its records must be Reachable=false, never empty: the daemon takes an empty read as "+
			"\"nothing was written\" and halts the step for a retry", ManyRecords, len(rd.records))
	case len(ids) != ManyRecords || len(seen) != ManyRecords:
		t.Errorf("%d seeded records read as a successful read of %d records with %d distinct identities: an adapter defect "+
			"(a read that is not whole must be Reachable=false, sdk.Incomplete)", ManyRecords, len(ids), len(seen))
	}
}

// crash kills the adapter while a capture streams. The read must end in
// ErrPluginShutdown; it may only end cleanly if every record had already
// arrived, and never as a shorter read set.
func (k *kit) crash(t *testing.T) {
	r := k.start(t, k.h.Config(t))
	k.h.Reset(t)
	total := ManyRecords
	if k.h.OneRecord {
		k.h.WriteCorrect(t)
		total = 1
	} else {
		k.h.SeedMany(t, ManyRecords)
	}
	var c *host.Stream
	k.bulk(t, func(timeout time.Duration) (bool, string) {
		req := k.req()
		req.Timeout = timeout
		// The stream outlives this function: the test's context ends it.
		ctx, cancel := context.WithTimeout(t.Context(), timeout+AnswerGrace)
		t.Cleanup(cancel)
		var err error
		if c, err = r.after(ctx, req); err != nil {
			t.Fatalf("CaptureAfter of %d records returned an error; a read out of time must answer Reachable=false by its Timeout (%v; the kit waited %v more): %v", total, timeout, AnswerGrace, err)
		}
		return c.Reachable, c.Reason
	})
	got, killed := 0, false
	var final error
	for batch, err := range c.RawBatches() {
		if err != nil {
			final = err
			break
		}
		got += len(batch)
		if !killed {
			r.kill()
			killed = true
		}
	}
	switch {
	case errors.Is(final, host.ErrPluginShutdown):
		t.Logf("killed after %d of %d records: the read ended in ErrPluginShutdown", got, total)
	case final != nil:
		t.Errorf("after the kill the read ended with %v; want an error wrapping host.ErrPluginShutdown", final)
	case got != total:
		t.Errorf("after the kill the read ended cleanly with %d of %d records: a partial read passed as complete", got, total)
	default:
		t.Logf("the whole read (%d records) had arrived before the kill landed", got)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := r.test(ctx); !errors.Is(err, host.ErrPluginShutdown) {
		t.Errorf("a call to the killed adapter returned %v; want ErrPluginShutdown", err)
	}
}

// matches reports whether every selector pair equals the record's value as
// text. This is only the kit's view of "the selected entity", for telling
// records apart; verdicts are the judge's.
func matches(r sdk.Record, selector map[string]string) bool {
	for k, want := range selector {
		got, ok := text(r[k])
		if !ok {
			return false
		}
		if got == want {
			continue
		}
		// A number read back as 1.0 is the selected 1; a string "1.0" is not.
		if _, isString := r[k].(string); isString || !sameNumber(got, want) {
			return false
		}
	}
	return true
}

// text is a record value as text (param.Text for a scalar, JSON for a map
// or a list); a missing or null value has none.
func text(v any) (string, bool) {
	if v == nil {
		return "", false
	}
	if s, ok := param.Text(v); ok {
		return s, true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return string(b), true
}

func sameNumber(a, b string) bool {
	x, ok1 := new(big.Rat).SetString(a)
	y, ok2 := new(big.Rat).SetString(b)
	return ok1 && ok2 && x.Cmp(y) == 0
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// instances configures a second instance in the process of the first:
// both read, each under its own id; a released instance is gone (its id is
// refused) while the other still reads.
func (k *kit) instances(t *testing.T) {
	k.h.Reset(t)
	r := k.start(t, k.h.Config(t))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	second, err := r.Configure(ctx, k.h.Config(t))
	if err != nil {
		t.Fatalf("a second Configure in the same process: %v", err)
	}
	if second == r.id {
		t.Fatalf("two instances share the id %q", second)
	}
	info, err := r.GetInfo(ctx, second)
	if err != nil || !info.Tier.Valid() {
		t.Fatalf("GetInfo of the second instance: %+v, %v", info, err)
	}
	if info.MaxConcurrentCaptures < 0 {
		t.Errorf("Info.MaxConcurrentCaptures = %d; want 0 (the daemon's default) or more", info.MaxConcurrentCaptures)
	}
	if err := r.Release(ctx, r.id); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, err := r.before(ctx, k.req()); err == nil {
		t.Fatal("a released instance still captured; Release must drop it")
	}
	r.id = second
	k.mustReach(t, k.capture(t, r, false), "CaptureBefore on the instance that was not released")
}
