package session

import (
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/verifierd/verifierd/internal/metrics"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/judge"
)

// verifyNote is what verify tells its caller for the log line and the
// metrics: the session's deployment name, and whether this call judged the
// session (judged), found a result already stored (replay), or failed
// while judging (judging without judged).
type verifyNote struct {
	deployment string
	judging    bool
	judged     bool
	replay     bool
}

// beginOutcome names a Begin's outcome for the log and the metrics: BEGUN,
// the terminal outcome of a refusal recorded in the ledger, or the
// refusal's kind.
func beginOutcome(err error) string {
	if err == nil {
		return "BEGUN"
	}
	var se *Error
	if !errors.As(err, &se) {
		return "ERROR"
	}
	switch {
	case se.TerminalOutcome != "":
		return se.TerminalOutcome
	case se.Kind == Invalid:
		return "INVALID"
	case se.Kind == NotFound:
		return "NOT_FOUND"
	case se.Kind == Denied:
		return "DENIED"
	case se.Kind == Refused:
		return "REFUSED"
	}
	return "ERROR"
}

// kindsOf lists the adapter kinds a session reads through, sorted, once
// each.
func kindsOf(kinds []string) []string {
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

// observer writes the log line and records the metrics of each Begin and
// Verify, to the Manager's logger and metrics (nil: none).
type observer struct {
	metrics *metrics.Metrics
	logger  hclog.Logger
}

// begin writes one log line per Begin and records its metrics. The
// line carries ids, names, kinds, outcomes and durations only: never a
// parameter value, a record value or a secret.
func (m observer) begin(req BeginRequest, res *BeginResult, err error, took time.Duration) {
	outcome := beginOutcome(err)
	m.metrics.BeginDone(outcome, took)
	var id string
	var kinds []string
	if res != nil {
		id = res.SessionID
		for _, e := range res.Effects {
			kinds = append(kinds, e.Candidate)
		}
	}
	fields := []any{"session", id, "deployment", req.DeploymentName, "workflow", req.Workflow, "step", req.Step,
		"outcome", outcome, "duration_ms", took.Milliseconds(), "kinds", kindsOf(kinds)}
	if err != nil {
		if se, ok := errors.AsType[*Error](err); ok {
			fields = append(fields, "code", se.Code, "path", se.Path)
		}
		m.logger.Info("session refused", fields...)
		return
	}
	m.logger.Info("session begun", fields...)
}

// verify writes one log line per Verify and, when the call judged
// the session (not a stored result answered again), records its metrics.
func (m observer) verify(id string, note *verifyNote, res *Result, err error, took time.Duration) {
	outcome := "ERROR"
	var kinds []string
	if res != nil {
		outcome = string(res.Outcome)
		for _, e := range res.Effects {
			kinds = append(kinds, e.Substrate)
		}
	}
	switch {
	case note.judged:
		m.metrics.VerifyDone(note.deployment, outcome, took)
		tasks := 0
		for _, e := range res.Effects {
			m.metrics.Verdict(note.deployment, e.Substrate, string(e.Verdict), string(e.Result), e.Tier)
			if e.ReconciliationTask != nil {
				tasks++
			}
		}
		m.metrics.TasksIssued(tasks)
	case note.judging && err != nil:
		m.metrics.VerifyDone(note.deployment, outcome, took)
	}
	if _, damaged := errors.AsType[*store.IntegrityError](err); damaged {
		m.metrics.IntegrityError()
	}
	fields := []any{"session", id, "deployment", note.deployment, "outcome", outcome,
		"duration_ms", took.Milliseconds(), "kinds", kindsOf(kinds), "replay", note.replay}
	if res != nil && res.Outcome != judge.Verified {
		fields = append(fields, "reconciliation_tasks", len(openTasks(res)))
	}
	if err != nil {
		m.logger.Warn("session not verified", append(fields, "error", errKind(err))...)
		return
	}
	m.logger.Info("session verified", fields...)
}

// errKind names a failed Verify without its message (which may quote
// input).
func errKind(err error) string {
	if _, ok := errors.AsType[*Error](err); ok {
		return beginOutcome(err)
	}
	return "internal"
}
