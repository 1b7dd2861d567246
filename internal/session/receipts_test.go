package session

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
)

func signedManager(t *testing.T, adapters ...sdk.Adapter) *Manager {
	t.Helper()
	m := newManager(t, adapters...)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	m.signer = signing.New(priv)
	return m
}

func ledgerOf(t *testing.T, m *Manager) []receipt.Entry {
	t.Helper()
	var buf bytes.Buffer
	if err := m.store.ExportLedger(t.Context(), 0, func(_ receipt.Entry, c []byte) error {
		buf.Write(append(c, '\n'))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	entries, err := receipt.ReadEntries(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := receipt.VerifyChain(entries, false); err != nil {
		t.Fatal(err)
	}
	return entries
}

func openReceipt(t *testing.T, m *Manager, raw json.RawMessage) receipt.VerdictPayload {
	t.Helper()
	env, err := receipt.ParseEnvelope(raw)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := env.Open(m.signer.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	var p receipt.VerdictPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		t.Fatal(err)
	}
	if _, err := receipt.FindReceipt(ledgerOf(t, m), payload); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVerifyReceiptBindsTheResult(t *testing.T) {
	t.Parallel()
	tab := &table{}
	m := signedManager(t, &memAdapter{kind: "receipt-test", tier: 1, table: tab})
	dep := []byte("effects: {kind: receipt-test, newness: whole_read}\n")
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: dep, Effects: []byte(effectsRW), Params: map[string]string{"p": "v-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	tab.add(sdk.Record{"id": json.Number("1"), "p": "v-secret"})
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	p := openReceipt(t, m, v.Receipt)
	if bytes.Contains(v.Receipt, []byte("v-secret")) {
		t.Error("the receipt holds a parameter value")
	}
	want := receipt.EffectClaim{Index: 0, ContractHash: res.Effects[0].ContractHash, Verdict: "CONFIRMED", Result: "confirmed", Tier: 1, OracleRung: 2,
		Substrate: "receipt-test", ReasonCodes: []string{judge.ReasonCountExact}, ObservedCount: v.Effects[0].ObservedCount,
		EvidenceDigests: []string{m.KeyedDigest([]byte(`{"id":1,"p":"v-secret"}`))},
		Newness:         "whole_read_declared", CollateralScope: "collection"}
	if d := cmp.Diff([]receipt.EffectClaim{want}, p.Effects); d != "" {
		t.Errorf("effects (-want +got):\n%s", d)
	}
	if p.SessionID != res.SessionID || p.TerminalOutcome != "VERIFIED" || p.Deployment.Digest != sha256Hex(dep) ||
		len(p.Baseline) != 1 || p.Baseline[0].Records != 0 || p.After[0].Records != 1 || !strings.HasPrefix(p.After[0].Digest, "hmac-sha256:") ||
		p.Signer.KeyID != m.signer.KeyID() || p.Ledger.Seq != 3 {
		t.Errorf("payload %+v", p)
	}
	// The stored result carries the same receipt.
	again, err := m.Verify(context.Background(), res.SessionID)
	if err != nil || !bytes.Equal(again.Receipt, v.Receipt) {
		t.Errorf("second verify: %v, same receipt %v", err, bytes.Equal(again.Receipt, v.Receipt))
	}
	if _, err := m.Reverify(context.Background(), res.SessionID, "nothing"); !isKind(err, Refused) {
		t.Errorf("reverify of a VERIFIED session: %v, want Refused", err)
	}
}

// An unreachable system of record is RECONCILIATION_REQUIRED in the ledger,
// never FAILED_PLATFORM: the adapter itself ran.
func TestUnreachableSystemOfRecordIsNotAPlatformFailure(t *testing.T) {
	t.Parallel()
	tab := &table{}
	m := signedManager(t, &memAdapter{kind: "offline-test", tier: 1, table: tab})
	res, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte("effects: {kind: offline-test, newness: whole_read}\n"),
		Effects: []byte(`[{"kind": "record_written", "match": {"p": "1"}, "count_new_only": true, "risk": "irreversible", "timeout_s": 0.05}]`)})
	if err != nil {
		t.Fatal(err)
	}
	tab.mu.Lock()
	tab.unreachable = true
	tab.mu.Unlock()
	v, err := m.Verify(context.Background(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Outcome != judge.ReconciliationRequired || v.TerminalOutcome != string(judge.ReconciliationRequired) {
		t.Errorf("outcome %s, terminal %s", v.Outcome, v.TerminalOutcome)
	}
	p := openReceipt(t, m, v.Receipt)
	if p.After[0].Reachable || p.Effects[0].ReconciliationTask == "" {
		t.Errorf("payload %+v", p)
	}
	var types []string
	for _, e := range ledgerOf(t, m) {
		types = append(types, e.Type)
	}
	if got := strings.Join(types, " "); got != "begin verify reconciliation_opened receipt" {
		t.Errorf("ledger %s", got)
	}
}

func TestTerminalOutcome(t *testing.T) {
	t.Parallel()
	caps := []captureMeta{{Effects: []int{0}}, {Effects: []int{1}}}
	ind := judge.Verdict{Decision: judge.Indeterminate}
	conf := judge.Verdict{Decision: judge.Confirmed}
	ref := judge.Verdict{Decision: judge.Refuted}
	for name, tc := range map[string]struct {
		verdicts []judge.Verdict
		failed   [2]bool
		want     string
	}{
		"adapter crashed":               {[]judge.Verdict{ind, conf}, [2]bool{true, false}, OutcomeFailedPlatform},
		"crash beside a refutation":     {[]judge.Verdict{ind, ref}, [2]bool{true, false}, "RECONCILIATION_REQUIRED"},
		"system of record unreachable":  {[]judge.Verdict{ind, conf}, [2]bool{false, false}, "RECONCILIATION_REQUIRED"},
		"verified despite a later hint": {[]judge.Verdict{conf, conf}, [2]bool{true, true}, "VERIFIED"},
	} {
		ev := &stepEvidence{Groups: []groupEvidence{{PlatformFailed: tc.failed[0]}, {PlatformFailed: tc.failed[1]}}}
		o := judge.ReconciliationRequired
		if tc.want == "VERIFIED" {
			o = judge.Verified
		}
		if got := terminalOutcome(o, tc.verdicts, caps, ev); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}

func TestRefusedBeginHasAReceipt(t *testing.T) {
	t.Parallel()
	tab := &table{unreachable: true}
	m := signedManager(t, &memAdapter{kind: "refuse-test", tier: 1, table: tab})
	_, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte("effects: {kind: refuse-test, newness: whole_read}\n"), Effects: []byte(effectsRW), Params: map[string]string{"p": "1"}})
	var se *Error
	if !errors.As(err, &se) || se.Kind != Refused || se.TerminalOutcome != string(judge.HaltedBeforeEffect) || len(se.Receipt) == 0 {
		t.Fatalf("refusal %#v", err)
	}
	p := openReceipt(t, m, se.Receipt)
	if p.Kind != EntryBeginRefused || p.TerminalOutcome != string(judge.HaltedBeforeEffect) || p.Refusal == nil || p.Refusal.MessageDigest == "" {
		t.Errorf("payload %+v", p)
	}
	env, err := m.RecordRefusal(t.Context(), RefusedBegin{Outcome: OutcomeRejectedPolicy, DeploymentName: "clinic", Err: &Error{Kind: Refused, Path: "params.subject", Message: "subject p-77 is not allowed"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := openReceipt(t, m, env); p.TerminalOutcome != OutcomeRejectedPolicy || bytes.Contains(env, []byte("p-77")) {
		t.Errorf("policy refusal %+v", p)
	}
}

// TestReceiptRungFollowsPluginTier: a plugin kind is placed on the oracle
// ladder by the tier it declares, and the result and its receipt state the
// same rung.
func TestReceiptRungFollowsPluginTier(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tier sdk.Tier
		rung int
	}{
		{sdk.TierIndependentSystem, 2},
		{sdk.TierIndependentSession, 1},
		{sdk.TierReacquiredState, 0},
	} {
		tab := &table{}
		m := signedManager(t, &memAdapter{kind: "rung-test", tier: tc.tier, table: tab})
		res, err := m.Begin(context.Background(), BeginRequest{Deployment: []byte("effects: {kind: rung-test, newness: whole_read}\n"), Effects: []byte(effectsRW), Params: map[string]string{"p": "v"}})
		if err != nil {
			t.Fatal(err)
		}
		tab.add(sdk.Record{"id": json.Number("1"), "p": "v"})
		v, err := m.Verify(context.Background(), res.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		p := openReceipt(t, m, v.Receipt)
		if v.Effects[0].OracleRung != tc.rung || p.Effects[0].OracleRung != tc.rung || p.Effects[0].Tier != int(tc.tier) {
			t.Errorf("tier %d: result rung %d, receipt rung %d tier %d; want rung %d", tc.tier, v.Effects[0].OracleRung, p.Effects[0].OracleRung, p.Effects[0].Tier, tc.rung)
		}
	}
}
