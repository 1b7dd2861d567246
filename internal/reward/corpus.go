package reward

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/verifierd/verifierd/judge"
)

// CorpusSchema names the derived corpus in its digest.
const CorpusSchema = "verifierd.reward-derived-corpus/v1"

// Fault classes a calibration trial plants.
const (
	FaultExtraRecord      = "extra_record"
	FaultDuplicateRecord  = "duplicate_record"
	FaultMissingRecord    = "missing_record"
	FaultWrongField       = "wrong_field"
	FaultWrongSubject     = "wrong_subject"
	FaultForbiddenPresent = "forbidden_present"
)

// DefaultSeed and DefaultTrials are calibration's defaults.
const (
	DefaultSeed   = 20260901
	DefaultTrials = 300
	DefaultDelta  = 0.05
)

// TemplateValue is a literal or a {param} resolved against the trial's
// subject.
type TemplateValue struct {
	Literal string `json:"literal,omitempty"`
	Param   string `json:"param,omitempty"`
}

// Template is one record the contract describes, planted Count times.
type Template struct {
	Fields map[string]TemplateValue `json:"fields"`
	Count  int                      `json:"count"`
	// selector is the match the template came from (for merging).
	selector string
}

// Corpus is derived from a contract's own effects.
type Corpus struct {
	Schema         string     `json:"corpus"`
	IdentityKeys   []string   `json:"identity_keys"`
	Intended       []Template `json:"intended"`
	Forbidden      []Template `json:"forbidden"`
	IdentityFields []string   `json:"identity_fields"`
	Digest         string     `json:"-"`
}

func selectorTemplate(sel judge.Selector) map[string]TemplateValue {
	out := map[string]TemplateValue{}
	for k, v := range sel {
		out[k] = TemplateValue{Literal: v.Literal, Param: v.Param}
	}
	return out
}

func selectorKey(sel judge.Selector) string { return canonicalJSON(selectorTemplate(sel)) }

// templates derives the records a list of effects describes: one per
// distinct match selector (a field_equals on the same selector merges its
// field into that record), one per exact_new_set member.
func templates(effects []judge.Effect, identityFields map[string]bool) []Template {
	var out []Template
	find := func(key string) int {
		for i := range out {
			if out[i].selector == key {
				return i
			}
		}
		return -1
	}
	for _, e := range effects {
		switch e.Kind {
		case judge.RecordWritten:
			key := selectorKey(e.Match)
			i := find(key)
			if i < 0 {
				out = append(out, Template{Fields: selectorTemplate(e.Match), selector: key})
				i = len(out) - 1
			}
			out[i].Count = max(out[i].Count, e.ExpectedCount)
			if e.IdempotencyKey != nil {
				kf := e.KeyField
				if kf == "" {
					kf = judge.DefaultKeyField
				}
				out[i].Fields[kf] = TemplateValue{Literal: e.IdempotencyKey.Literal, Param: e.IdempotencyKey.Param}
			}
		case judge.FieldEquals:
			key := selectorKey(e.Match)
			i := find(key)
			if i < 0 {
				out = append(out, Template{Fields: selectorTemplate(e.Match), Count: 1, selector: key})
				i = len(out) - 1
			}
			if e.Value != nil {
				out[i].Fields[e.Field] = TemplateValue{Literal: e.Value.Literal, Param: e.Value.Param}
			}
		case judge.ExactNewSet:
			idf := e.IdentityField
			if idf == "" {
				idf = judge.DefaultIdentityField
			}
			identityFields[idf] = true
			for _, m := range e.NewRecords {
				fields := selectorTemplate(e.Match)
				for k, v := range m {
					fields[k] = TemplateValue{Literal: v.Literal, Param: v.Param}
				}
				out = append(out, Template{Fields: fields, Count: 1, selector: canonicalJSON(fields)})
			}
		}
	}
	return out
}

// DeriveCorpus builds the calibration corpus from the contract and its
// digest: a certificate names this digest, so it cannot be carried over to
// a contract with other effects.
func DeriveCorpus(c *Contract) (*Corpus, error) {
	idf := map[string]bool{judge.DefaultIdentityField: true}
	cp := &Corpus{Schema: CorpusSchema, IdentityKeys: c.IdentityKeys}
	cp.Intended = templates(c.Required, idf)
	cp.Forbidden = templates(c.Forbidden, idf)
	cp.IdentityFields = sortedNames(idf)
	if cp.Intended == nil {
		cp.Intended = []Template{}
	}
	if cp.Forbidden == nil {
		cp.Forbidden = []Template{}
	}
	cp.Digest = "sha256:" + canonicalDigest(cp)
	return cp, nil
}

// Subject is a trial subject: every identity key bound to value.
func (cp *Corpus) subject(value string) map[string]string {
	out := map[string]string{}
	for _, k := range cp.IdentityKeys {
		out[k] = k + "-" + value
	}
	return out
}

type planter struct {
	cp     *Corpus
	nextID int
}

func (p *planter) record(t Template, subject map[string]string, mutate string) judge.Record {
	r := judge.Record{}
	for k, v := range t.Fields {
		if v.Param != "" {
			r[k] = subject[v.Param]
		} else {
			r[k] = v.Literal
		}
	}
	if mutate != "" {
		r[mutate] = fmt.Sprint(r[mutate]) + "-wrong"
	}
	p.nextID++
	for _, f := range p.cp.IdentityFields {
		if _, set := t.Fields[f]; set {
			continue
		}
		if f == judge.DefaultIdentityField {
			r[f] = json.Number(strconv.Itoa(p.nextID))
		} else {
			r[f] = fmt.Sprintf("%s-%d", f, p.nextID)
		}
	}
	return r
}

func (p *planter) plant(ts []Template, subject map[string]string, mutate string) []judge.Record {
	var out []judge.Record
	for i, t := range ts {
		m := ""
		if i == 0 {
			m = mutate
		}
		for range t.Count {
			out = append(out, p.record(t, subject, m))
		}
	}
	return out
}

// mutableField is the first field of the first intended template that is
// a literal and not an identity field ("" when there is none).
func (cp *Corpus) mutableField() string {
	if len(cp.Intended) == 0 || cp.Intended[0].Count <= 0 {
		return ""
	}
	ident := map[string]bool{}
	for _, f := range cp.IdentityFields {
		ident[f] = true
	}
	var names []string
	for k, v := range cp.Intended[0].Fields {
		if v.Param == "" && !ident[k] {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// FaultClasses are the classes that apply to this corpus, sorted.
func (cp *Corpus) FaultClasses() []string {
	out := []string{FaultMissingRecord, FaultWrongSubject}
	planted := 0
	for _, t := range cp.Intended {
		planted += max(t.Count, 0)
	}
	if planted > 0 {
		out = append(out, FaultExtraRecord, FaultDuplicateRecord)
	}
	if cp.mutableField() != "" {
		out = append(out, FaultWrongField)
	}
	forb := 0
	for _, t := range cp.Forbidden {
		forb += max(t.Count, 0)
	}
	if forb > 0 {
		out = append(out, FaultForbiddenPresent)
	}
	slices.Sort(out)
	return out
}

// Calibration is a calibration run's result (calibration.json).
type Calibration struct {
	Schema        string   `json:"schema"`
	ContractID    string   `json:"contract_id"`
	ContractHash  string   `json:"reward_contract_digest"`
	Trials        int      `json:"trials"`
	FalseAccepts  int      `json:"false_accepts"`
	Confidence    float64  `json:"confidence"`
	Delta         float64  `json:"delta"`
	Epsilon       float64  `json:"epsilon"`
	Seed          uint64   `json:"seed"`
	Method        string   `json:"method"`
	CorpusDigest  string   `json:"calibration_corpus_digest"`
	FaultClasses  []string `json:"fault_classes"`
	ClassesPlaced []string `json:"fault_classes_sampled"`
}

// ErrCalibrationRefused: the corpus does not exercise the contract.
var ErrCalibrationRefused = errors.New("calibration refused")

// Calibrate runs the control trial and n faulted trials through judgeFn
// (the daemon's one judging path, with no deployment: the corpus is
// synthetic). Every trial is judged exactly as a scored episode is.
func Calibrate(c *Contract, n int, delta float64, seed uint64, judgeFn EffectJudge) (*Calibration, error) {
	if n < 1 || n > 100000 {
		return nil, fmt.Errorf("%w: trials must be 1 to 100000", ErrCalibrationRefused)
	}
	if !(delta > 0 && delta < 1) {
		return nil, fmt.Errorf("%w: delta must be in (0, 1)", ErrCalibrationRefused)
	}
	cp, err := DeriveCorpus(c)
	if err != nil {
		return nil, err
	}
	classes := cp.FaultClasses()
	if len(classes) == 0 {
		return nil, fmt.Errorf("%w: no fault class applies to this contract", ErrCalibrationRefused)
	}
	judgeTrial := func(subject map[string]string, before, after []judge.Record) (string, error) {
		req, forb, err := BindEffects(c, subject)
		if err != nil {
			return "", err
		}
		j := JudgeEpisode(judgeFn, req, forb, OracleRead{Snapshot: judge.Snapshot{Reachable: true, Records: before}}, OracleRead{Snapshot: judge.Snapshot{Reachable: true, Records: after}}, SignalCompleted)
		return j.Outcome, nil
	}
	// The control: a clean store built from the contract's own effects
	// must judge verified, or a zero false-accept count means nothing.
	ctl := &planter{cp: cp}
	ctlSubject := cp.subject("cal-control")
	out, err := judgeTrial(ctlSubject, []judge.Record{}, ctl.plant(cp.Intended, ctlSubject, ""))
	if err != nil {
		return nil, err
	}
	if out != OutcomeVerified {
		return nil, fmt.Errorf("%w: a clean store built from this contract's own required effects judges %s, not verified, so the corpus does not exercise the contract; check the required effects for contradictions", ErrCalibrationRefused, out)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	mutate := cp.mutableField()
	sampled := map[string]bool{}
	falseAccepts := 0
	for i := range n {
		fault := classes[rng.IntN(len(classes))]
		sampled[fault] = true
		subject := cp.subject(fmt.Sprintf("cal-%04d", i))
		other := cp.subject(fmt.Sprintf("cal-%04d-other", i))
		p := &planter{cp: cp, nextID: 100 + rng.IntN(900)}
		before := p.plant(cp.Intended, other, "")
		after := append([]judge.Record{}, before...)
		switch fault {
		case FaultMissingRecord:
		case FaultWrongSubject:
			after = append(after, p.plant(cp.Intended, cp.subject(fmt.Sprintf("cal-%04d-wrong", i)), "")...)
		case FaultExtraRecord:
			after = append(after, p.plant(cp.Intended, subject, "")...)
			after = append(after, p.record(firstPlanted(cp), subject, ""))
		case FaultDuplicateRecord:
			clean := p.plant(cp.Intended, subject, "")
			after = append(after, clean...)
			after = append(after, clean[0])
		case FaultWrongField:
			after = append(after, p.plant(cp.Intended, subject, mutate)...)
		case FaultForbiddenPresent:
			after = append(after, p.plant(cp.Intended, subject, "")...)
			after = append(after, p.plant(cp.Forbidden, subject, "")...)
		}
		out, err := judgeTrial(subject, before, after)
		if err != nil {
			return nil, err
		}
		if out == OutcomeVerified {
			falseAccepts++
		}
	}
	if falseAccepts >= n {
		return nil, fmt.Errorf("%w: every trial was accepted; the contract does not tell a fault from a correct episode", ErrCalibrationRefused)
	}
	return &Calibration{
		Schema: "verifierd.reward-calibration/v1", ContractID: c.ID, ContractHash: c.Digest,
		Trials: n, FalseAccepts: falseAccepts, Confidence: 1 - delta, Delta: delta,
		Epsilon: ClopperPearsonUpper(falseAccepts, n, delta), Seed: seed,
		Method: "clopper_pearson_one_sided_exact", CorpusDigest: cp.Digest,
		FaultClasses: classes, ClassesPlaced: sortedNames(sampled),
	}, nil
}

func firstPlanted(cp *Corpus) Template {
	for _, t := range cp.Intended {
		if t.Count > 0 {
			return t
		}
	}
	return cp.Intended[0]
}
