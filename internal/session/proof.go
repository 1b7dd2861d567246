package session

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
)

// This file is the one place where the daemon turns reads into the
// verdicts it signs: Verify and Reverify (group.judgeRead, through
// judgeStep), FinishRun's re-reads and RollbackCheck (judgeStep), reward
// scoring (RewardOracle.Judge), VerifyArtifact (proveArtifact) and the
// stateless Judge all judge here, under the options proofOptions makes
// of the deployment. No other file of the daemon calls judge.Judge,
// judge.JudgeBatch or judge.PollGroup (onepath_test.go checks it).

// proofReads are the two reads one judgement compares: in map form, or in
// compact form when both batches are set (then they are judged instead).
type proofReads struct {
	before, after           judge.Snapshot
	beforeBatch, afterBatch *judge.BatchSnapshot
}

// proofOptions are the deployment's full judge options for a read of
// cand by an adapter that cannot (absenceNotProof) or can prove absence:
// its census (nil when none was read), its freshness window at now, and
// the absence rule. cand nil is a read of no deployment (the stateless
// Judge, a calibration case): no census, no freshness.
func proofOptions(cand *config.Candidate, absenceNotProof bool, census *judge.Census, now time.Time) judge.Options {
	opts := judge.Options{AbsenceNotProof: absenceNotProof, Census: census}
	if cand != nil && cand.Freshness != nil {
		opts.Freshness = &judge.Freshness{Field: cand.Freshness.Field, WindowS: cand.Freshness.WindowS, Now: now}
	}
	return opts
}

// withWriteSet gives the judge a candidate's write set (nil: the candidate
// reads none). A candidate with changes: always gives one, an unreadable
// one included, so its verdicts never fall back to the baseline diff.
func withWriteSet(opts judge.Options, ws *judge.WriteSet) judge.Options {
	opts.WriteSet = ws
	return opts
}

// prove judges every effect on one pair of reads under opts, read
// through cand (nil: no deployment), and says what the proof rested on:
// the only call of the judge in the daemon.
func prove(cand *config.Candidate, effects []*judge.Contract, r proofReads, opts judge.Options) Proof {
	out := make([]judge.Verdict, len(effects))
	for k, c := range effects {
		if r.beforeBatch != nil && r.afterBatch != nil {
			out[k] = judge.JudgeBatch(c, *r.beforeBatch, *r.afterBatch, opts)
		} else {
			out[k] = judge.Judge(c, r.before, r.after, opts)
		}
	}
	return proofOf(cand, opts, out)
}

// settleProof reads and judges (check, which judges through prove) until
// the effects settle (docs/contracts.md §6): the only poll of the daemon.
func settleProof(ctx context.Context, clock judge.Clock, opts judge.PollOptions, check func(context.Context) []judge.Verdict) []judge.Verdict {
	return judge.PollGroup(ctx, clock, opts, check)
}

// Proof is what one judgement rested on, beside its verdicts: how the
// candidate proves a record new and what its loss checks see (as results
// and receipts record them), whether a census was given to the judge and
// served every contract, whether a freshness window applied, and whether
// the adapter can prove absence.
type Proof struct {
	Verdicts        []judge.Verdict
	Newness         string
	CollateralScope string
	// Census is true when the judge was given a census; CensusUsable when
	// no verdict was left INDETERMINATE because it could not serve.
	Census       bool
	CensusUsable bool
	Freshness    bool
	// AbsenceIsProof is false for an adapter whose surface can hide
	// records: its refutations class as conflicting.
	AbsenceIsProof bool
}

// proofOf is the Proof of verdicts judged under opts through cand (nil:
// no deployment).
func proofOf(cand *config.Candidate, opts judge.Options, verdicts []judge.Verdict) Proof {
	p := Proof{Verdicts: verdicts, Census: opts.Census != nil, Freshness: opts.Freshness != nil, AbsenceIsProof: !opts.AbsenceNotProof}
	if cand != nil {
		p.Newness, p.CollateralScope = cand.NewnessOf(), cand.CollateralScope()
		if cand.Changes != nil && opts.WriteSet == nil {
			// Judged without its write set (a reward's stored reads): the
			// proof rests on the reads alone.
			reads := *cand
			reads.Changes = nil
			p.Newness, p.CollateralScope = reads.NewnessOf(), reads.CollateralScope()
		}
	}
	p.CensusUsable = p.Census
	for _, v := range verdicts {
		for _, code := range v.Codes() {
			if code == judge.ReasonCensusUnusable {
				p.CensusUsable = false
			}
		}
	}
	return p
}

// Reason codes of an artifact verification.
const (
	ReasonArtifactExact    = "ARTIFACT_EXACT"
	ReasonArtifactOther    = "ARTIFACT_OTHER_BYTES"
	ReasonArtifactAbsent   = "ARTIFACT_ABSENT"
	ReasonArtifactNoAccess = judge.ReasonSORUnreachable
)

// proveArtifact decides VerifyArtifact from one read of a document store
// under the deployment's options (opts.AbsenceNotProof: an adapter that
// cannot prove absence leaves a missing document INDETERMINATE). A file
// matches the name by its name or by its path's last element.
func proveArtifact(s judge.Snapshot, a receipt.Artifact, opts judge.Options) (judge.Decision, []judge.Reason) {
	if !s.Reachable {
		return judge.Indeterminate, []judge.Reason{{Code: ReasonArtifactNoAccess, Message: "the store could not be read: " + s.Reason}}
	}
	named := 0
	for _, r := range s.Records {
		name, _ := r["name"].(string)
		p, _ := r["path"].(string)
		if name != a.Name && path.Base(p) != a.Name {
			continue
		}
		named++
		sum, _ := r["sha256"].(string)
		if strings.EqualFold(sum, a.SHA256) && fmt.Sprint(r["size"]) == fmt.Sprint(a.Size) {
			return judge.Confirmed, []judge.Reason{{Code: ReasonArtifactExact, Message: "a document with exactly this digest and size is present"}}
		}
	}
	if named > 0 {
		return judge.Refuted, []judge.Reason{{Code: ReasonArtifactOther, Message: fmt.Sprintf("%d document(s) of that name hold other bytes", named)}}
	}
	if opts.AbsenceNotProof {
		return judge.Indeterminate, []judge.Reason{{Code: ReasonArtifactAbsent, Message: "no document of that name was seen, and this adapter cannot prove absence"}}
	}
	return judge.Refuted, []judge.Reason{{Code: ReasonArtifactAbsent, Message: "no document of that name is present"}}
}
