package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/receipt"
)

// RefusedBegin is a Begin refused before anything was read or done, to
// record in the ledger with a signed receipt (the refusal itself is Err).
// The policy checks call RecordRefusal with Outcome OutcomeRejectedPolicy.
type RefusedBegin struct {
	Outcome        string // OutcomeRejectedPolicy, OutcomeFailedPlatform or judge.HaltedBeforeEffect
	DeploymentName string
	Deployment     []byte // the deployment YAML, when known (digested only)
	Workflow       *receipt.WorkflowRef
	Err            *Error
}

// RecordRefusal appends a refused Begin to the ledger and returns its
// signed receipt (nil without a signing key). The refusal message is
// recorded by digest only: it may name a parameter value.
func (m *Manager) RecordRefusal(ctx context.Context, r RefusedBegin) (json.RawMessage, error) {
	if m.store == nil {
		return nil, nil
	}
	key := fmt.Sprintf("refusal/%s", newID())
	// Keyed: a message can quote a low-entropy parameter value.
	claim := &receipt.RefusalClaim{MessageDigest: m.KeyedDigest([]byte(r.Err.Message)), Path: r.Err.Path, Code: r.Err.Code}
	var dep receipt.DeploymentRef
	dep.Name = r.DeploymentName
	if len(r.Deployment) > 0 {
		dep.Digest = sha256Hex(r.Deployment)
	}
	var env json.RawMessage
	_, err := m.store.PutReceipt(ctx, key, func(l store.Ledger) ([]byte, error) {
		if _, err := l.Append(EntryBeginRefused, "", jsonDigest(map[string]any{"outcome": r.Outcome, "refusal": claim, "deployment": dep})); err != nil {
			return nil, err
		}
		var err error
		env, err = newReceiptSigner(m.signer).sign(l, receipt.PayloadTypeVerdict, "", func(pos receipt.Position, signer receipt.Signer) any {
			return receipt.VerdictPayload{
				Kind: receipt.KindBeginRefused, Deployment: dep, Workflow: r.Workflow, TerminalOutcome: r.Outcome,
				Effects: []receipt.EffectClaim{}, Refusal: claim, EvidenceDigest: "hmac-sha256",
				IssuedAt: time.Now().UTC(), Ledger: pos, Signer: signer,
			}
		})
		if env == nil {
			return []byte("{}"), err
		}
		return env, err
	})
	return env, err
}

// recordBeginRefusal records a Refused Begin error and attaches its
// receipt; other errors pass unchanged.
func (m *Manager) recordBeginRefusal(ctx context.Context, req BeginRequest, deployment []byte, err error) error {
	var se *Error
	if !errors.As(err, &se) || (se.Kind != Refused && se.Kind != Denied) {
		return err
	}
	var wf *receipt.WorkflowRef
	if req.Workflow != "" {
		wf = &receipt.WorkflowRef{Name: req.Workflow, Step: req.Step}
		if w := m.workflows[req.Workflow]; w != nil {
			wf.Digest = w.Digest
		}
	}
	env, rerr := m.RecordRefusal(ctx, RefusedBegin{Outcome: refusalOutcome(se), DeploymentName: req.DeploymentName, Deployment: deployment, Workflow: wf, Err: se})
	if rerr != nil {
		m.logger.Error("recording a refused Begin in the ledger", "error", rerr)
		return err
	}
	out := *se
	out.TerminalOutcome, out.Receipt = refusalOutcome(se), env
	return &out
}
