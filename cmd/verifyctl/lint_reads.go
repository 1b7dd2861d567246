package main

import (
	"fmt"
	"strings"

	sqladapter "github.com/verifierd/verifierd/adapters/sql"
	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/workflow"
)

// Finding codes of the read guards that need the deployment file (lint
// --deployment FILE).
const (
	// codeCappedRead: a sql candidate's query caps its own result.
	codeCappedRead = "capped_read"
	// codeNoSettleWindow: a change claim of an irreversible step answers at
	// its first CONFIRMED.
	codeNoSettleWindow = "no_settle_window"
)

// candidatePath is a candidate's path in its deployment file.
func candidatePath(dep *config.Deployment, c config.Candidate) string {
	if len(dep.Candidates) == 1 {
		return "effects"
	}
	return fmt.Sprintf("effects.candidates[%d]", c.Index)
}

// readFindings applies the read guards that need the deployment: a sql
// query capped at its outermost statement (capped_read, one per candidate,
// step ""), a change claim over a read no candidate proves new
// (newness_unproven, from the deployment's templates alone, so no --param
// is needed; newnessFindings), and a change claim of an irreversible step with no settle
// window (no_settle_window, one per such effect). The settle floor is the
// larger of the deployment's and the workflow's min_settle_s; the daemon
// config's layer is the daemon's and not read here, so a daemon floor
// silences the finding only at Begin.
func readFindings(w *workflow.Workflow, dep *config.Deployment) []lintFinding {
	var out []lintFinding
	for _, c := range dep.Candidates {
		if c.Kind != sqladapter.Kind {
			continue
		}
		q, _ := c.Section["sql_query"].(string)
		if capped := sqladapter.CappedRead(q); capped != "" {
			out = append(out, lintFinding{Code: codeCappedRead, Path: candidatePath(dep, c) + ".sql_query",
				Message: fmt.Sprintf("the query's outermost statement carries %s, so the read stops at that many rows: a duplicate past the cap goes uncounted and a record pushed past it reads as lost; remove the cap and narrow the read with WHERE instead (a cap inside a subquery is fine)", capped)})
		}
	}
	var readers []workflow.Reader
	for _, c := range dep.Candidates {
		readers = append(readers, c.NewnessReader(fmt.Sprintf("%s (%s)", candidatePath(dep, c), c.Kind)))
	}
	out = append(out, newnessFindings(w, workflow.Resolve(dep.Policy, w.Policy), readers)...)
	floor := workflow.Resolve(dep.Policy, w.Policy).MinSettleS
	var unsettled []string
	for _, c := range dep.Candidates {
		if max(c.SettleS, floor) == 0 {
			unsettled = append(unsettled, fmt.Sprintf("%s (%s)", candidatePath(dep, c), c.Kind))
		}
	}
	if len(unsettled) == 0 {
		return out
	}
	for i, s := range w.Steps {
		if !s.Irreversible() {
			continue
		}
		for j, e := range s.Effects {
			if !workflow.IsChangeClaim(e) {
				continue
			}
			out = append(out, lintFinding{Code: codeNoSettleWindow, Step: s.Name, Effect: new(j), Path: fmt.Sprintf("steps[%d].effects[%d]", i, j),
				Message: fmt.Sprintf("an irreversible step's change claim is answered at its first CONFIRMED through %s, so a double submit that lands a moment later is not seen; set settle_s on the candidate, or policy.min_settle_s in the daemon config, the deployment or this workflow", strings.Join(unsettled, ", "))})
		}
	}
	return out
}
