package session

import (
	"slices"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/param"
)

// The parameter names an effects document references, cached by its bytes
// and bounded like the parsed documents. Only a document that bound and
// passed the contract guards enters it.
var effectsParamNames = newDocCache[map[string]bool](docCacheEntries, docCacheBytes)

// unusedParams names the run parameters of a Begin that nothing of the step
// references, sorted (nil when every one is used): not a contract of the
// step ({param: name} anywhere in it, or a {name} placeholder of a
// {template: ...}), and not a candidate of the deployment ({param: name} in
// its section, option_params or compensator, or a {name} placeholder in any
// of its text, which is how URL templates such as onscreen's name a run
// parameter). A secret or subject parameter counts as used exactly when it
// is referenced. The judge is not asked: the names come from the documents
// as written, so a parameter is reported only when no reference to it can
// be found. A plugin that reads a run parameter it is not configured to
// reference is not seen; the report is a warning, never a refusal.
func unusedParams(params map[string]string, dep *config.Deployment, effects []byte) []string {
	if len(params) == 0 {
		return nil
	}
	key := docKey(effects)
	used, ok := effectsParamNames.get(key)
	if !ok {
		used = map[string]bool{}
		// Begin has parsed this document already; one that does not
		// decode here references nothing that could be reported.
		if tree, err := judge.DecodeDocument(effects); err == nil {
			paramRefs(tree, false, used)
		}
		effectsParamNames.put(key, len(effects), used)
	}
	var unused []string
	var byCandidates map[string]bool // built only when a contract does not use a name
	for name := range params {
		if used[name] {
			continue
		}
		if byCandidates == nil {
			byCandidates = candidateParamRefs(dep)
		}
		if !byCandidates[name] {
			unused = append(unused, name)
		}
	}
	slices.Sort(unused)
	return unused
}

// candidateParamRefs is every run parameter a candidate of dep references.
func candidateParamRefs(dep *config.Deployment) map[string]bool {
	names := map[string]bool{}
	for i := range dep.Candidates {
		c := &dep.Candidates[i]
		for _, v := range c.OptionParams {
			if v.IsParam() {
				names[v.Param] = true
			}
		}
		paramRefs(c.Section, true, names)
		paramRefs(c.Compensator, true, names)
	}
	return names
}

// paramRefs adds to names every run parameter that tree references: the
// name of each {param: name} map, and the placeholders of each template
// string ({template: "..."}; every string when anyText, as in a
// deployment section, whose adapters fill placeholders of their own text).
func paramRefs(tree any, anyText bool, names map[string]bool) {
	switch x := tree.(type) {
	case map[string]any:
		if p, ok := x["param"].(string); ok {
			names[p] = true
		}
		if t, ok := x["template"].(string); ok {
			for _, n := range param.Names(t) {
				names[n] = true
			}
		}
		for _, v := range x {
			paramRefs(v, anyText, names)
		}
	case []any:
		for _, v := range x {
			paramRefs(v, anyText, names)
		}
	case string:
		if anyText {
			for _, n := range param.Names(x) {
				names[n] = true
			}
		}
	}
}
