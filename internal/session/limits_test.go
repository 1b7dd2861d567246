package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/workflow"
)

// limitRefusal asserts err is a session refusal of the kind, at the path, whose
// message names want and stays short (a huge input is never echoed whole).
func limitRefusal(t *testing.T, err error, kind ErrorKind, path, want string) {
	t.Helper()
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if se.Kind != kind || se.Path != path || !strings.Contains(se.Message, want) {
		t.Errorf("refusal = kind %d %q: %q, want kind %d %q naming %q", se.Kind, se.Path, se.Message, kind, path, want)
	}
	if n := len(se.Error()); n > 2*messageBytes {
		t.Errorf("refusal is %d bytes long; it echoes the input", n)
	}
}

func manyEffects(n int) []byte {
	one := `{"kind": "record_written", "match": {"p": {"param": "p"}}}`
	return []byte("[" + strings.TrimSuffix(strings.Repeat(one+",", n), ",") + "]")
}

func nested(depth int) []byte {
	return []byte(`[{"kind": "record_written", "match": {"p": ` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}}]`)
}

func TestBeginLimits(t *testing.T) {
	t.Parallel()
	m := newManager(t, &memAdapter{kind: "limit-test", tier: 1, table: &table{}})
	// These tests are about limits, not the change-claim guard.
	noClaim := false
	m.daemon.Policy = callerContracts(&workflow.Policy{RequireChangeClaim: &noClaim})
	dep := []byte("effects: {kind: limit-test, newness: whole_read}\n")
	p := map[string]string{"p": "1"}
	many := map[string]string{}
	for i := range MaxParams + 1 {
		many[fmt.Sprint("k", i)] = "v"
	}
	cands := "effects:\n  candidates:\n" + strings.Repeat("  - {kind: limit-test}\n", MaxCandidates+1)
	tests := map[string]struct {
		req        BeginRequest
		path, want string
	}{
		"1001 effects":      {BeginRequest{Deployment: dep, Effects: manyEffects(MaxEffects + 1), Params: p}, "effects", "limit of 1000 effects"},
		"effects too large": {BeginRequest{Deployment: dep, Effects: make([]byte, MaxDocumentBytes+1), Params: p}, "effects", "limit of 1048576 bytes"},
		"effects too deep":  {BeginRequest{Deployment: dep, Effects: nested(MaxDocumentDepth), Params: p}, "effects", "limit of 32 levels"},
		"yaml alias": {BeginRequest{Deployment: dep, Effects: []byte("- &a {kind: record_written, match: {p: x}}\n- *a\n"), Params: p},
			"effects", "aliases are not allowed"},
		"deployment too large": {BeginRequest{Deployment: []byte("effects: {kind: " + strings.Repeat("k", MaxDocumentBytes) + "}\n"), Effects: manyEffects(1), Params: p},
			"deployment", "limit of 1048576 bytes"},
		"kind too long": {BeginRequest{Deployment: []byte("effects: {kind: " + strings.Repeat("k", 100_000) + "}\n"), Effects: manyEffects(1), Params: p},
			"deployment.effects.candidates[0].kind", "limit of 256 bytes"},
		"33 candidates":       {BeginRequest{Deployment: []byte(cands), Effects: manyEffects(1), Params: p}, "deployment.effects.candidates", "limit of 32 candidates"},
		"deployment name":     {BeginRequest{DeploymentName: strings.Repeat("n", 1<<20), Effects: manyEffects(1), Params: p}, "deployment_name", "limit of 256 bytes"},
		"too many params":     {BeginRequest{Deployment: dep, Effects: manyEffects(1), Params: many}, "params", "limit of 256 parameters"},
		"param value 10 MB":   {BeginRequest{Deployment: dep, Effects: manyEffects(1), Params: map[string]string{"p": strings.Repeat("v", 10<<20)}}, "params.p", "limit of 65536 bytes"},
		"param name too long": {BeginRequest{Deployment: dep, Effects: manyEffects(1), Params: map[string]string{strings.Repeat("n", 1<<20): "v"}}, "params", "limit of 128 bytes"},
		"param invalid utf-8": {BeginRequest{Deployment: dep, Effects: manyEffects(1), Params: map[string]string{"p": "\xff\xfe"}}, "params.p", "UTF-8"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := m.Begin(context.Background(), tc.req)
			limitRefusal(t, err, Invalid, tc.path, tc.want)
		})
	}
	// At the limits, the same shapes are accepted.
	if _, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: manyEffects(MaxEffects), Params: p}); err != nil {
		t.Errorf("1000 effects refused: %v", err)
	}
	if _, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: nested(MaxDocumentDepth - 5), Params: p}); err != nil && strings.Contains(err.Error(), "levels") {
		t.Errorf("a document within the depth limit refused: %v", err)
	}
}

// A refused step leaves nothing in the document cache: 12 refused 14 MB
// effects lists once held 3 GB.
func TestRefusedDocumentsNotCached(t *testing.T) {
	t.Parallel()
	m := newManager(t, &memAdapter{kind: "nocache-test", tier: 1, table: &table{}})
	// These tests are about limits, not the change-claim guard.
	noClaim := false
	m.daemon.Policy = callerContracts(&workflow.Policy{RequireChangeClaim: &noClaim})
	// Documents no other test or run (-count) has sent: the cache is shared.
	nonce := time.Now().UnixNano()
	dep := []byte(fmt.Sprintf("effects: {kind: nocache-test, newness: whole_read}\n# %d\n", nonce))
	// Parses, but refers to a parameter the request does not give.
	unbound := []byte(fmt.Sprintf(`[{"kind": "record_written", "match": {"p": {"param": "p"}, "nonce": "%d"}}]`, nonce))
	_, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: unbound})
	limitRefusal(t, err, Invalid, "effects[0].match.p.param", "missing run parameter")
	if _, ok := parsedEffects.get(docKey(unbound)); ok {
		t.Error("a refused effects list was cached")
	}
	if _, ok := parsedDeployments.get(docKey(dep)); ok {
		t.Error("the deployment of a refused step was cached")
	}
	// Accepted: both cached.
	if _, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: unbound, Params: map[string]string{"p": "1"}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := parsedEffects.get(docKey(unbound)); !ok {
		t.Error("an accepted effects list was not cached")
	}
}

func TestDocCacheBoundedByBytesLRU(t *testing.T) {
	t.Parallel()
	c := newDocCache[int](100, 1000)
	key := func(i int) [32]byte { return docKey([]byte(fmt.Sprint(i))) }
	for i := range 50 {
		c.put(key(i), 100, i)
		if i >= 5 {
			c.get(key(0)) // keep 0 recently used
		}
	}
	if n, b := c.stats(); b > 1000 || n != 10 {
		t.Errorf("cache holds %d entries, %d bytes; want 10 entries within 1000 bytes", n, b)
	}
	if _, ok := c.get(key(0)); !ok {
		t.Error("the most recently used entry was evicted")
	}
	if _, ok := c.get(key(1)); ok {
		t.Error("the least recently used entry survived")
	}
	c.put(key(99), 126, 99) // over an eighth of the budget: not kept
	if _, ok := c.get(key(99)); ok {
		t.Error("an entry over an eighth of the budget was kept")
	}
	small := newDocCache[int](3, 1<<20)
	for i := range 10 {
		small.put(key(i), 1, i)
	}
	if n, _ := small.stats(); n != 3 {
		t.Errorf("cache holds %d entries, want 3", n)
	}
}

// Verify with unknown ids holds nothing afterwards (500 unknown 1 MB ids
// once held 1 GB in the lock map), and never echoes an id whole.
func TestUnknownSessionLeavesNoLock(t *testing.T) {
	t.Parallel()
	m := newManager(t, &memAdapter{kind: "lock-test", tier: 1, table: &table{}})
	for i := range 200 {
		id := fmt.Sprintf("ses_%0100d", i)
		_, err := m.Verify(context.Background(), id)
		limitRefusal(t, err, NotFound, "session_id", "no session")
		if err != nil && strings.Contains(err.Error(), id) {
			t.Fatalf("the NotFound message echoes the whole id: %v", err)
		}
	}
	_, err := m.Verify(context.Background(), strings.Repeat("x", 1<<20))
	limitRefusal(t, err, Invalid, "session_id", "limit of 128 bytes")
	_, err = m.Get(t.Context(), strings.Repeat("x", 1<<20))
	limitRefusal(t, err, Invalid, "session_id", "limit of 128 bytes")
	if n := m.locks.len(); n != 0 {
		t.Errorf("%d lock entries left after unknown ids, want 0", n)
	}
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte("effects: {kind: lock-test, newness: whole_read}\n"), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Verify(context.Background(), res.SessionID); err != nil {
		t.Fatal(err)
	}
	if n := m.locks.len(); n != 0 {
		t.Errorf("%d lock entries left after a finished session, want 0", n)
	}
}

func TestKeyedMutexSerialises(t *testing.T) {
	t.Parallel()
	var k keyedMutex
	ctx := t.Context()
	unlock, err := k.lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	got, done := make(chan struct{}), make(chan struct{})
	go func() {
		u, err := k.lock(ctx, "a")
		if err != nil {
			t.Error(err)
			close(got)
			close(done)
			return
		}
		close(got)
		u()
		close(done)
	}()
	other, err := k.lock(ctx, "b") // another key does not wait
	if err != nil {
		t.Fatal(err)
	}
	other()
	select {
	case <-got:
		t.Fatal("a second holder got the lock")
	default:
	}
	unlock()
	<-done
	if n := k.len(); n != 0 {
		t.Errorf("%d entries left, want 0", n)
	}
}

// TestVerifyWaitHonoursContext: a Verify waiting for a session another call
// holds returns its context's error when the context ends, leaves the
// session begun (a later Verify judges it) and holds no lock afterwards.
func TestVerifyWaitHonoursContext(t *testing.T) {
	t.Parallel()
	m := newManager(t, &memAdapter{kind: "lock-test", tier: 1, table: &table{}})
	res, err := m.Begin(t.Context(), BeginRequest{Deployment: []byte("effects: {kind: lock-test, newness: whole_read}\n"), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := m.locks.lock(t.Context(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := m.Verify(ctx, res.SessionID)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Verify waiting on a held session with a canceled context: %v, want context.Canceled", err)
	}
	unlock()
	if _, err := m.Verify(t.Context(), res.SessionID); err != nil {
		t.Fatalf("Verify after the holder released: %v", err)
	}
	if n := m.locks.len(); n != 0 {
		t.Errorf("%d lock entries left, want 0", n)
	}
}
