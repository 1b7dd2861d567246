package session

import (
	"fmt"
	"maps"
	"slices"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/workflow"
)

// newnessGuard tells preflight whether Begin would refuse every change
// claim of the registered workflow steps through a candidate under
// policy.require_proven_newness: it holds the policy Begin resolves
// (Manager.policy) and the registered workflows. Its zero value checks
// nothing.
type newnessGuard struct {
	policy    func(*config.Deployment, *workflow.Workflow) workflow.Effective
	workflows map[string]*workflow.Workflow
}

// readerOf is candidate ci of dep as the newness guard sees it: its path
// and kind in messages, its census, its newness: declaration and what
// narrows its read.
func readerOf(dep *config.Deployment, ci int) workflow.Reader {
	c := &dep.Candidates[ci]
	return c.NewnessReader(fmt.Sprintf("%s (%s)", candidatePath(dep, ci), c.Kind))
}

// refusal says why Begin would refuse every change claim (count_new_only,
// exact_new_set, new_only) of the registered workflows' steps read through
// candidate ci, naming the policy; "" when at least one such claim would
// begin, or no registered step makes one.
func (g newnessGuard) refusal(dep *config.Deployment, ci int) string {
	if g.policy == nil {
		return ""
	}
	r := readerOf(dep, ci)
	var refused []workflow.Finding
	for _, name := range slices.Sorted(maps.Keys(g.workflows)) {
		wf := g.workflows[name]
		p := g.policy(dep, wf)
		for si := range wf.Steps {
			s := &wf.Steps[si]
			for j, e := range s.Effects {
				if !workflow.ClaimsNewness(e) {
					continue
				}
				path := fmt.Sprintf("workflows.%s.steps[%d].effects[%d]", name, si, j)
				fs := workflow.CheckNewness(p.ForStep(s), e, r, j, path)
				if len(fs) == 0 {
					return ""
				}
				refused = append(refused, fs[0])
			}
		}
	}
	if len(refused) == 0 {
		return ""
	}
	return fmt.Sprintf("require_proven_newness: Begin would refuse every change claim of the registered workflow steps read through this candidate (%d, first %s): %s",
		len(refused), refused[0].Path, refused[0].Message)
}
