package session

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/oracle"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
)

// ArtifactResult is VerifyArtifact's answer.
type ArtifactResult struct {
	Verdict judge.Decision `json:"verdict"`
	Reasons []judge.Reason `json:"reasons"`
	Tier    int            `json:"tier"`
	// OracleRung is the read's rung of the oracle ladder (internal/oracle);
	// 0 with tier 0, when no read was made.
	OracleRung int    `json:"oracle_rung"`
	Substrate  string `json:"substrate"`
	Receipt    json.RawMessage
}

// artifactKinds read files with name, size and sha256 fields.
var artifactKinds = map[string]bool{"document-hash": true, "file": true}

// VerifyArtifact answers whether the registered deployment name (a
// document-hash or file deployment) holds a document with exactly the
// artifact's digest and size under its name: CONFIRMED only then; a file of
// that name with other bytes, or no file of that name, REFUTED; a store that
// cannot be read INDETERMINATE. Every answer is signed and in the ledger.
func (m *Manager) VerifyArtifact(ctx context.Context, deploymentName string, a receipt.Artifact) (*ArtifactResult, error) {
	return m.artifacts().verify(ctx, deploymentName, a)
}

// artifactVerifier checks artifacts against registered deployments
// (VerifyArtifact) and signs every answer into the ledger.
type artifactVerifier struct {
	daemon     *config.Daemon // registered deployments; may be nil
	configurer *configurer
	lookupEnv  func(string) (string, bool)
	reader     afterReader
	store      store.Backend
	receipts   receiptSigner
}

// newArtifactVerifier reads the deployments registered in daemon through
// c and reader, masks the secrets lookupEnv resolves, and records every
// answer in st's ledger, signed by receipts (which may hold no key).
func newArtifactVerifier(daemon *config.Daemon, c *configurer, lookupEnv func(string) (string, bool), reader afterReader, st store.Backend, receipts receiptSigner) artifactVerifier {
	return artifactVerifier{daemon: daemon, configurer: c, lookupEnv: lookupEnv, reader: reader, store: st, receipts: receipts}
}

// artifacts is the Manager's artifact verifier, over its parts.
func (m *Manager) artifacts() artifactVerifier {
	return newArtifactVerifier(m.daemon, m.configurer(), m.lookupEnv, afterReader{keys: m.keys, metrics: m.metrics}, m.store, newReceiptSigner(m.signer))
}

// verify is VerifyArtifact.
func (v artifactVerifier) verify(ctx context.Context, deploymentName string, a receipt.Artifact) (*ArtifactResult, error) {
	a.SHA256 = strings.ToLower(strings.TrimPrefix(a.SHA256, "sha256:"))
	if b, err := hex.DecodeString(a.SHA256); err != nil || len(b) != 32 {
		return nil, &Error{Kind: Invalid, Path: "artifact.sha256", Message: "write the 64 hex digits of the content's SHA-256"}
	}
	if a.Size < 0 {
		return nil, &Error{Kind: Invalid, Path: "artifact.size", Message: "a size is 0 or more bytes"}
	}
	if a.Name == "" || strings.ContainsAny(a.Name, "/\\") {
		return nil, &Error{Kind: Invalid, Path: "artifact.name", Message: "give the file name (no folder) under the deployment's root"}
	}
	if deploymentName == "" {
		return nil, &Error{Kind: Invalid, Path: "deployment_name", Message: "name a document-hash or file deployment registered in the daemon config"}
	}
	raw, dep, ci, err := artifactCandidate(v.daemon, deploymentName)
	if err != nil {
		return nil, err
	}
	cand := dep.Candidates[ci]
	insts, errs := v.configurer.configure(ctx, dep, nil, map[string]string{}, false)
	res := &ArtifactResult{Substrate: cand.Kind}
	var read receipt.ReadDigest
	switch {
	case errs[ci] != nil:
		res.Verdict = judge.Indeterminate
		res.Reasons = []judge.Reason{{Code: ReasonArtifactNoAccess, Message: "the adapter could not be configured: " + errs[ci].Error()}}
	default:
		inst := insts[ci]
		res.Tier = int(inst.Info().Tier)
		res.OracleRung = int(oracle.Of(cand.Kind, inst.Info().Tier))
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		snap, _ := v.reader.snapshot(rctx, inst, sdk.CaptureRequest{
			CaptureID: fmt.Sprintf("artifact/%s/%d", a.SHA256, time.Now().UnixNano()), EffectKind: string(judge.RecordWritten), Timeout: time.Minute,
		})
		cancel()
		read = v.reader.keys.readDigest(snap)
		res.Verdict, res.Reasons = proveArtifact(snap, a, proofOptions(&cand, inst.Info().AbsenceNotProof, nil, time.Now().UTC()))
	}
	// A reason may quote what the adapter read or said: no secret of the
	// candidate leaves in it.
	secrets := maskSecrets(v.lookupEnv, &cand)
	for i, r := range res.Reasons {
		res.Reasons[i] = judge.Reason{Code: r.Code, Message: secrets.text(r.Message)}
	}
	env, err := v.store.PutReceipt(ctx, "artifact/"+newID(), func(l store.Ledger) ([]byte, error) {
		claim := receipt.ArtifactPayload{
			Deployment: receipt.DeploymentRef{Name: deploymentName, Digest: sha256Hex(raw)}, Artifact: a,
			Verdict: string(res.Verdict), Reasons: codesOf(res.Reasons), Tier: res.Tier, OracleRung: res.OracleRung, Substrate: res.Substrate, Read: read,
		}
		if _, err := l.Append(EntryArtifact, "", jsonDigest(claim)); err != nil {
			return nil, err
		}
		env, err := v.receipts.sign(l, receipt.PayloadTypeArtifact, "", func(pos receipt.Position, signer receipt.Signer) any {
			claim.IssuedAt, claim.Ledger, claim.Signer = time.Now().UTC(), pos, signer
			return claim
		})
		if env == nil {
			return []byte("{}"), err
		}
		return env, err
	})
	if err != nil {
		return nil, err
	}
	if v.receipts.s != nil {
		res.Receipt = env
	}
	return res, nil
}

func codesOf(rs []judge.Reason) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Code)
	}
	return out
}
