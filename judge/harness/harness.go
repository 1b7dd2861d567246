// Package harness runs one conformance case (docs/contracts.md §8) through the judge:
// case JSON in, verdict JSON and an exit code out, with no substrate. It is
// what `verifyctl judge` runs, and what the conformance tests run in-process.
package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/refusal"
	"github.com/verifierd/verifierd/sdk/unstable/strict"
)

// parallelRecords is the read size from which the effects of a case are
// judged in parallel.
const parallelRecords = 20_000

// Exit codes.
const (
	ExitOK      = 0
	ExitRefused = 2
)

// Output is the harness result on success.
type Output struct {
	Outcome judge.Outcome        `json:"outcome"`
	Effects []judge.EffectResult `json:"effects"`
}

// Refusal is the harness result for a refused case.
type Refusal struct {
	Error *refusal.Error `json:"error"`
}

// Case is a parsed conformance case.
type Case struct {
	Effects []judge.Effect
	Params  map[string]string
	Before  judge.Snapshot
	After   judge.Snapshot
	// BeforeBatch and AfterBatch are the reads in compact form: set by
	// ParseString (and then Before and After carry only reachability).
	BeforeBatch judge.BatchSnapshot
	AfterBatch  judge.BatchSnapshot
	compact     bool
	Now         *time.Time
	Freshness   *judge.Freshness
	// Census is the case's before_census and after_census (docs/contracts.md §3a),
	// when it gives them.
	Census *judge.Census
	// WriteSet is the case's changes (docs/contracts.md §3b), when given.
	WriteSet *judge.WriteSet
}

// knownCaseKeys lists a case's keys for messages, in caseFile's order.
var knownCaseKeys = strings.Join(strict.Keys(reflect.TypeFor[caseFile]()), ", ")

// Run judges one case. now is used for freshness when the case gives none.
func Run(input []byte, now time.Time) ([]byte, int) {
	return RunString(string(input), now)
}

// RunString is Run on a case held as a string (no copy of a large case).
func RunString(input string, now time.Time) ([]byte, int) {
	return RunOptions(input, now, judge.Options{})
}

// RunOptions is RunString under opts: the case's own census and freshness
// are added to them, and opts.Arena (when set) is where the case's large
// reads are decoded.
func RunOptions(input string, now time.Time, opts judge.Options) ([]byte, int) {
	out, err := judgeString(input, now, opts)
	if err != nil {
		// A refusal without a code (a value refused before the judge
		// named its rule) is the case's, as any other error.
		jerr, ok := errors.AsType[*refusal.Error](err)
		if !ok || jerr.Code == "" {
			jerr = &refusal.Error{Code: judge.CodeInvalidCase, Message: err.Error()}
		}
		return encode(Refusal{Error: jerr}), ExitRefused
	}
	return encode(out), ExitOK
}

// Judge parses, binds and judges one case.
func Judge(input []byte, now time.Time) (*Output, error) {
	return JudgeString(string(input), now)
}

// JudgeString parses (with the fast decoder), binds and judges one case.
func JudgeString(input string, now time.Time) (*Output, error) {
	return judgeString(input, now, judge.Options{})
}

func judgeString(input string, now time.Time, opts judge.Options) (*Output, error) {
	c, err := parseFast(input, opts.Arena)
	if err != nil {
		return nil, err
	}
	return judgeCaseWith(c, now, opts)
}

// judgeCase binds and judges a parsed case.
func judgeCase(c *Case, now time.Time) (*Output, error) {
	return judgeCaseWith(c, now, judge.Options{})
}

// judgeCaseWith is judgeCase with the case's census and freshness added
// to base.
func judgeCaseWith(c *Case, now time.Time, base judge.Options) (*Output, error) {
	contracts := make([]*judge.Contract, len(c.Effects))
	for i, e := range c.Effects {
		bound, err := judge.Bind(e, c.Params, fmt.Sprintf("effects[%d]", i))
		if err != nil {
			return nil, err
		}
		contracts[i] = bound
	}
	opts := base
	opts.Census, opts.WriteSet = c.Census, c.WriteSet
	if c.Freshness != nil {
		f := *c.Freshness
		f.Now = now
		if c.Now != nil {
			f.Now = *c.Now
		}
		opts.Freshness = &f
	}
	verdicts := make([]judge.Verdict, len(contracts))
	out := &Output{Effects: make([]judge.EffectResult, len(contracts))}
	one := func(i int) {
		if c.compact {
			verdicts[i] = judge.JudgeBatch(contracts[i], c.BeforeBatch, c.AfterBatch, opts)
		} else {
			verdicts[i] = judge.Judge(contracts[i], c.Before, c.After, opts)
		}
		out.Effects[i] = judge.ResultOf(verdicts[i])
	}
	if c.compact && len(contracts) > 1 && c.BeforeBatch.Batch.Len()+c.AfterBatch.Batch.Len() >= parallelRecords {
		// Judging reads a batch and never writes it: large reads judge
		// every effect at once.
		var wg sync.WaitGroup
		for i := range contracts {
			wg.Go(func() { one(i) })
		}
		wg.Wait()
	} else {
		for i := range contracts {
			one(i)
		}
	}
	out.Outcome = judge.OutcomeOf(verdicts)
	return out, nil
}

func invalid(path, format string, args ...any) *refusal.Error {
	return &refusal.Error{Code: judge.CodeInvalidCase, Path: path, Message: fmt.Sprintf(format, args...)}
}

// Parse reads a case strictly: unknown keys, wrong types and malformed reads
// are refused with INVALID_CASE, contracts with INVALID_CONTRACT. It decodes
// the reads into maps (Before, After); ParseString is the fast decoder.
func Parse(input []byte) (*Case, error) {
	tree, err := judge.DecodeJSON(input)
	if err != nil {
		return nil, invalid("", "the case is not valid JSON: %v", err)
	}
	m, ok := tree.(map[string]any)
	if !ok {
		return nil, invalid("", "a case is a JSON object with %s", knownCaseKeys)
	}
	c := &Case{}
	err = build(c, m, func(key string) error {
		snap, err := parseSnapshot(m, key)
		if key == "before" {
			c.Before = snap
		} else {
			c.After = snap
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// caseFile is a case's top level as the strict decoder (sdk/unstable/strict) reads
// it: its fields are the case's keys. The reads (before, after and the
// census) are checked by each decoder's own snapshot reader, and effects by
// judge.LoadEffects; here they are only keys.
type caseFile struct {
	Effects      any               `json:"effects"`
	Params       map[string]string `json:"params"`
	Before       any               `json:"before"`
	After        any               `json:"after"`
	BeforeCensus any               `json:"before_census"`
	AfterCensus  any               `json:"after_census"`
	Changes      any               `json:"changes"`
	Now          *string           `json:"now"`
	Freshness    *freshnessFile    `json:"freshness"`
}

type freshnessFile struct {
	Field   *string  `json:"field"`
	WindowS *float64 `json:"window_s"`
}

// caseRefusal is a strict refusal of the case as INVALID_CASE, at its path.
func caseRefusal(err error) error {
	if se, ok := errors.AsType[*strict.Error](err); ok {
		return invalid(se.Path, "%s", se.Message)
	}
	return invalid("", "%v", err)
}

// build checks and fills a case from its decoded keys, in a fixed order so
// that a case with several faults is refused for the same one by both
// decoders: the strict decoder's (an unknown key, the first by name, then
// a value of the wrong type), then params, before, after, the census, the
// write set (changes), now, freshness, effects.
func build(c *Case, m map[string]any, snapshot func(key string) error) error {
	var f caseFile
	if err := strict.Decode(m, "", &f); err != nil {
		return caseRefusal(err)
	}
	c.Params = f.Params
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	if err := snapshot("before"); err != nil {
		return err
	}
	if err := snapshot("after"); err != nil {
		return err
	}
	_, hasBefore := m["before_census"]
	_, hasAfter := m["after_census"]
	switch {
	case hasBefore && hasAfter:
		bc, err := parseSnapshot(m, "before_census")
		if err != nil {
			return err
		}
		ac, err := parseSnapshot(m, "after_census")
		if err != nil {
			return err
		}
		c.Census = &judge.Census{Before: bc, After: ac}
	case hasBefore:
		return invalid("after_census", "a census is two reads: give after_census as well as before_census")
	case hasAfter:
		return invalid("before_census", "a census is two reads: give before_census as well as after_census")
	}
	ws, err := parseChanges(m)
	if err != nil {
		return err
	}
	c.WriteSet = ws
	if f.Now != nil {
		t, err := judge.ParseTimestamp(*f.Now)
		if err != nil {
			return invalid("now", "%v", err)
		}
		c.Now = &t
	}
	if fr := f.Freshness; fr != nil {
		if fr.Field == nil || *fr.Field == "" {
			return invalid("freshness.field", "freshness.field must name the record's timestamp field")
		}
		if fr.WindowS == nil || *fr.WindowS < 0 {
			return invalid("freshness.window_s", "freshness.window_s must be a number of seconds >= 0")
		}
		c.Freshness = &judge.Freshness{Field: *fr.Field, WindowS: *fr.WindowS}
	}
	ev, ok := m["effects"]
	if !ok {
		return invalid("effects", "the case has no effects; give a list of effect contracts")
	}
	list, isList := ev.([]any)
	if !isList {
		return invalid("effects", "effects must be a list of effect contracts")
	}
	if len(list) == 0 {
		return invalid("effects", "effects is empty; a step with no declared effect proves nothing")
	}
	if c.Effects, err = judge.LoadEffects(list, "effects"); err != nil {
		return err
	}
	return nil
}

func parseSnapshot(m map[string]any, key string) (judge.Snapshot, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return judge.Snapshot{}, invalid(key, "missing; write {\"reachable\": true, \"records\": [...]} or {\"reachable\": false}")
	}
	sm, isMap := v.(map[string]any)
	if !isMap {
		return judge.Snapshot{}, invalid(key, "must be an object {reachable, records}")
	}
	for _, k := range slices.Sorted(maps.Keys(sm)) {
		if k != "reachable" && k != "records" && k != "reason" && k != "code" {
			return judge.Snapshot{}, invalid(key+"."+k, "unknown key %q (known: reachable, records, reason, code)", k)
		}
	}
	reachable, isBool := sm["reachable"].(bool)
	if !isBool {
		return judge.Snapshot{}, invalid(key+".reachable", "reachable must be true or false")
	}
	snap := judge.Snapshot{Reachable: reachable}
	if r, ok := sm["reason"]; ok {
		s, isStr := r.(string)
		if !isStr {
			return judge.Snapshot{}, invalid(key+".reason", "reason must be text")
		}
		snap.Reason = s
	}
	if r, ok := sm["code"]; ok {
		s, err := readCode(r, key, reachable)
		if err != nil {
			return judge.Snapshot{}, err
		}
		snap.Code = s
	}
	recs, has := sm["records"]
	if !reachable {
		if has && recs != nil {
			if l, isList := recs.([]any); !isList || len(l) > 0 {
				return judge.Snapshot{}, invalid(key+".records", "an unreachable read has no records; remove them or set reachable: true")
			}
		}
		return snap, nil
	}
	list, isList := recs.([]any)
	if !has || !isList {
		return judge.Snapshot{}, invalid(key+".records", "a reachable read needs records: a list of objects ([] for none)")
	}
	snap.Records = make([]judge.Record, len(list))
	for i, r := range list {
		rec, isObj := r.(map[string]any)
		if !isObj {
			return judge.Snapshot{}, invalid(fmt.Sprintf("%s.records[%d]", key, i), "a record must be a JSON object")
		}
		snap.Records[i] = rec
	}
	return snap, nil
}

// readCode checks a read's code: text naming the reason code of an
// unreachable read (READ_MAY_BE_TRUNCATED, READ_INCOMPLETE, ...).
func readCode(v any, key string, reachable bool) (string, error) {
	s, isStr := v.(string)
	if !isStr || s == "" {
		return "", invalid(key+".code", "code must be a reason code such as %q", judge.ReasonReadIncomplete)
	}
	if reachable {
		return "", invalid(key+".code", "code is the reason code of a read that did not complete; set reachable: false with it")
	}
	return s, nil
}

func encode(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		// Every value here is JSON-safe; this is a programming error.
		panic(err)
	}
	return buf.Bytes()
}
