package workflow

import (
	"fmt"
	"slices"
)

// Handoff is a step parameter whose value a run takes from an earlier
// step's evidence, never from the caller: the one record that effect
// From.Effect of step From.Step matched when that step was VERIFIED, and
// its field From.Field.
type Handoff struct {
	Param string
	From  HandoffSource
}

// HandoffSource names where a handoff value comes from. Effect is the
// index of the effect in the source step's effects list (effects carry no
// names): 0 for the first.
type HandoffSource struct {
	Step   string
	Effect int
	Field  string
}

// Consume is an artifact a step may begin with only once it is CONFIRMED
// in the run (VerifyArtifact with the run, the artifact and FromStep).
type Consume struct {
	Artifact string
	FromStep string
}

type handoffDoc struct {
	Param string         `json:"param"`
	From  *handoffSrcDoc `json:"from"`
}

type handoffSrcDoc struct {
	Step   string `json:"step"`
	Effect any    `json:"effect"`
	Field  string `json:"field"`
}

type consumeDoc struct {
	Artifact string `json:"artifact"`
	FromStep string `json:"from_step"`
}

type produceDoc struct {
	Artifact   string `json:"artifact"`
	Deployment string `json:"deployment"`
}

// Consequential reports whether a run needs the step VERIFIED: its risk is
// irreversible or reversible (not read_only).
func (s *Step) Consequential() bool { return s.Risk != RiskReadOnly }

// Params is every run parameter the step uses: those it enters and those
// its effects reference.
func (s *Step) Params() map[string]bool {
	out := map[string]bool{}
	for _, p := range s.Enters {
		out[p] = true
	}
	for _, e := range s.Effects {
		for p := range ReferencedParams(e) {
			out[p] = true
		}
	}
	return out
}

// Handoff returns the step's handoff of param.
func (s *Step) Handoff(param string) (*Handoff, bool) {
	for i := range s.Handoffs {
		if s.Handoffs[i].Param == param {
			return &s.Handoffs[i], true
		}
	}
	return nil, false
}

// Producer returns the step that produces artifact.
func (w *Workflow) Producer(artifact string) (*Step, bool) {
	for i := range w.Steps {
		if slices.Contains(w.Steps[i].Produces, artifact) {
			return &w.Steps[i], true
		}
	}
	return nil, false
}

// Consumed reports whether any step consumes artifact.
func (w *Workflow) Consumed(artifact string) bool {
	for i := range w.Steps {
		for _, c := range w.Steps[i].Consumes {
			if c.Artifact == artifact {
				return true
			}
		}
	}
	return false
}

// Artifacts lists every produced artifact with its producing step, in
// step order.
func (w *Workflow) Artifacts() []Consume {
	var out []Consume
	for _, s := range w.Steps {
		for _, a := range s.Produces {
			out = append(out, Consume{Artifact: a, FromStep: s.Name})
		}
	}
	return out
}

// Predecessors are the steps that must be VERIFIED (after:, a handoff's
// source) or have produced a confirmed artifact (consumes:) before s
// begins.
func (s *Step) Predecessors() []string {
	var out []string
	add := func(n string) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for _, a := range s.After {
		add(a)
	}
	for _, h := range s.Handoffs {
		add(h.From.Step)
	}
	for _, c := range s.Consumes {
		add(c.FromStep)
	}
	return out
}

// checkRunKeys reads and checks every step's after, handoffs, consumes and
// produces once all steps are known: a name must be a step of the
// workflow, an effect index in range, a handoff parameter one the step
// uses, a consumed artifact one its from_step produces, and the order
// they make may have no cycle.
func (w *Workflow) checkRunKeys(docs []stepDoc) error {
	producedBy := map[string]string{}
	for i, sd := range docs {
		s := &w.Steps[i]
		path := fmt.Sprintf("steps[%d]", i)
		for j, p := range sd.Produces {
			ppath := fmt.Sprintf("%s.produces[%d].artifact", path, j)
			if !validName(p.Artifact) {
				return refuse(ppath, "name the artifact: letters, digits and _ (starting with a letter or _)")
			}
			if other, dup := producedBy[p.Artifact]; dup {
				return refuse(ppath, "artifact %q is already produced by step %q; an artifact has one producing step", p.Artifact, other)
			}
			if p.Deployment == "" {
				return refuse(fmt.Sprintf("%s.produces[%d].deployment", path, j), "name the registered document-hash or file deployment where the run checks artifact %q (deployment: NAME): the workflow says where the daemon reads, never the caller", p.Artifact)
			}
			producedBy[p.Artifact] = s.Name
			s.Produces = append(s.Produces, p.Artifact)
			if s.ProducedAt == nil {
				s.ProducedAt = map[string]string{}
			}
			s.ProducedAt[p.Artifact] = p.Deployment
		}
	}
	for i, sd := range docs {
		s := &w.Steps[i]
		path := fmt.Sprintf("steps[%d]", i)
		for j, a := range sd.After {
			apath := fmt.Sprintf("%s.after[%d]", path, j)
			if err := w.checkStepRef(s.Name, a, apath); err != nil {
				return err
			}
			if slices.Contains(s.After, a) {
				return refuse(apath, "step %q is listed twice", a)
			}
			s.After = append(s.After, a)
		}
		uses := s.Params()
		for j, hd := range sd.Handoffs {
			h, err := w.parseHandoff(s, hd, fmt.Sprintf("%s.handoffs[%d]", path, j), uses)
			if err != nil {
				return err
			}
			s.Handoffs = append(s.Handoffs, h)
		}
		for j, cd := range sd.Consumes {
			cpath := fmt.Sprintf("%s.consumes[%d]", path, j)
			if cd.Artifact == "" {
				return refuse(cpath+".artifact", "name the artifact the step consumes (one a step produces:)")
			}
			if err := w.checkStepRef(s.Name, cd.FromStep, cpath+".from_step"); err != nil {
				return err
			}
			if producedBy[cd.Artifact] != cd.FromStep {
				return refuse(cpath+".artifact", "step %q does not produce artifact %q; add produces: [{artifact: %s}] to it, or name the step that does", cd.FromStep, cd.Artifact, cd.Artifact)
			}
			for _, c := range s.Consumes {
				if c.Artifact == cd.Artifact {
					return refuse(cpath+".artifact", "artifact %q is consumed twice", cd.Artifact)
				}
			}
			s.Consumes = append(s.Consumes, Consume(cd))
		}
	}
	return w.checkCycles()
}

// checkStepRef refuses a reference to an unknown step or to the step
// itself.
func (w *Workflow) checkStepRef(self, name, path string) error {
	if name == "" {
		return refuse(path, "name a step of this workflow")
	}
	if name == self {
		return refuse(path, "step %q cannot come after itself", name)
	}
	if _, ok := w.Step(name); !ok {
		names := make([]string, len(w.Steps))
		for i, s := range w.Steps {
			names[i] = s.Name
		}
		return refuse(path, "no step %q in this workflow (steps: %v)", name, names)
	}
	return nil
}

func (w *Workflow) parseHandoff(s *Step, hd handoffDoc, path string, uses map[string]bool) (Handoff, error) {
	var h Handoff
	if hd.Param == "" {
		return h, refuse(path+".param", "name the step parameter the value is handed to")
	}
	p, declared := w.Params[hd.Param]
	if !declared {
		return h, refuse(path+".param", "parameter %q is not declared under params:", hd.Param)
	}
	if !uses[hd.Param] {
		return h, refuse(path+".param", "step %q uses no parameter %q (neither enters: nor its effects reference it); hand off a parameter of the step", s.Name, hd.Param)
	}
	if p.Secret {
		return h, refuse(path+".param", "parameter %q is secret; a handed-off value is read from evidence and bound into contracts, so it cannot be a secret", hd.Param)
	}
	if _, dup := s.Handoff(hd.Param); dup {
		return h, refuse(path+".param", "parameter %q is handed off twice", hd.Param)
	}
	if hd.From == nil {
		return h, refuse(path+".from", "say where the value comes from: {step: STEP, effect: INDEX, field: FIELD}")
	}
	if err := w.checkStepRef(s.Name, hd.From.Step, path+".from.step"); err != nil {
		return h, err
	}
	src, _ := w.Step(hd.From.Step)
	n, ok := asInt(hd.From.Effect)
	if hd.From.Effect == nil || !ok {
		return h, refuse(path+".from.effect", "must be the index of an effect of step %q (0 for its first), got %v", hd.From.Step, hd.From.Effect)
	}
	if n < 0 || n >= len(src.Effects) {
		return h, refuse(path+".from.effect", "step %q has %d effects; the index must be from 0 to %d", hd.From.Step, len(src.Effects), len(src.Effects)-1)
	}
	if hd.From.Field == "" {
		return h, refuse(path+".from.field", "name the field of the matched record that holds the value")
	}
	return Handoff{Param: hd.Param, From: HandoffSource{Step: hd.From.Step, Effect: n, Field: hd.From.Field}}, nil
}

// checkCycles refuses an order no run can follow: a step that must come
// after itself through after:, handoffs or consumes.
func (w *Workflow) checkCycles() error {
	const (
		unseen = iota
		visiting
		done
	)
	state := map[string]int{}
	var visit func(name string, trail []string) error
	visit = func(name string, trail []string) error {
		switch state[name] {
		case visiting:
			return refuse(fmt.Sprintf("steps[%d]", w.index(name)), "the steps' order has a cycle: %v; a run could never begin them", append(trail, name))
		case done:
			return nil
		}
		state[name] = visiting
		s, _ := w.Step(name)
		for _, p := range s.Predecessors() {
			if err := visit(p, append(trail, name)); err != nil {
				return err
			}
		}
		state[name] = done
		return nil
	}
	for _, s := range w.Steps {
		if err := visit(s.Name, nil); err != nil {
			return err
		}
	}
	return nil
}

func (w *Workflow) index(name string) int {
	for i := range w.Steps {
		if w.Steps[i].Name == name {
			return i
		}
	}
	return -1
}
