package session

import (
	"context"
	"fmt"
	"time"

	"github.com/verifierd/verifierd/internal/compact"
	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// collectionSeen is what a group's last judged read saw of the whole
// collection: the after census, or the after read itself when the
// candidate reads the whole collection. A run's rollback check proves with
// it that a record the run created is gone, not only gone from the
// subject's read.
type collectionSeen struct {
	census []judge.Record
	whole  *judge.Batch
}

// noteCollection records in the group's evidence what its read saw of the
// whole collection (census: the after census, nil when the group has
// none): nothing when the read is of the subject only, or when identities
// may be hidden (keyed), so that no record is ever shown gone by a read
// that cannot see it.
func (g *group) noteCollection(census *judge.Snapshot, after *read) {
	g.ev.collection = nil
	switch {
	case g.cm.KeyID != "" || g.cand.Redaction.Active():
	case census != nil:
		if census.Reachable {
			g.ev.collection = &collectionSeen{census: census.Records}
		}
	case g.cand.Census == nil && g.cand.CollateralScope() == config.ScopeCollection && after.reachable() && after.snap.Batch != nil:
		// A whole read, proven or declared (the operator's assertion,
		// which every receipt records).
		g.ev.collection = &collectionSeen{whole: after.snap.Batch}
	}
}

// holds reports whether a record with identity id (the judge's identity
// text) in field is in the collection.
func (c *collectionSeen) holds(field, id string) bool {
	for _, r := range c.census {
		if v, ok := judge.Canon(r[field]); ok && v == id {
			return true
		}
	}
	if b := c.whole; b != nil {
		name := compact.NameIndex(b, field)
		for i := range b.Len() {
			if v, ok := compact.Get(b, compact.At(b, i), name); ok && v == id {
				return true
			}
		}
	}
	return false
}

// artifactCandidate is the registered deployment name (its bytes and
// parse) and the index of its document-hash or file candidate, where
// VerifyArtifact and a rollback check read documents.
func artifactCandidate(daemon *config.Daemon, name string) ([]byte, *config.Deployment, int, error) {
	raw, err := registeredDeployment(daemon, name)
	if err != nil {
		return nil, nil, 0, err
	}
	dep, _, err := parseDeployment(raw)
	if err != nil {
		return nil, nil, 0, err
	}
	for i, c := range dep.Candidates {
		if artifactKinds[c.Kind] {
			return raw, dep, i, nil
		}
	}
	return nil, nil, 0, &Error{Kind: Invalid, Path: "deployment_name", Message: fmt.Sprintf("deployment %q has no document-hash or file candidate", name)}
}

// documents reads every document the registered deployment name's
// document-hash or file candidate sees; absenceNotProof is its adapter's
// word that a document it does not list may still exist.
func (v artifactVerifier) documents(ctx context.Context, name string) (s judge.Snapshot, absenceNotProof bool, err error) {
	_, dep, ci, err := artifactCandidate(v.daemon, name)
	if err != nil {
		return judge.Snapshot{}, false, err
	}
	insts, errs := v.configurer.configure(ctx, dep, nil, map[string]string{}, false)
	if errs[ci] != nil {
		return judge.Snapshot{}, false, errs[ci]
	}
	inst := insts[ci]
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s, _ = v.reader.snapshot(rctx, inst, sdk.CaptureRequest{
		CaptureID: fmt.Sprintf("artifact-rollback/%s/%d", name, time.Now().UnixNano()), EffectKind: string(judge.RecordWritten), Timeout: time.Minute,
	})
	return s, inst.Info().AbsenceNotProof, nil
}
