package config

import (
	"maps"
	"slices"
	"sync/atomic"
)

// Notice is something a deployment loads with but should say differently:
// the path of what was written and what to write instead. A notice never
// refuses a deployment.
type Notice struct {
	// Candidate is the index of the candidate the notice is about.
	Candidate int
	Path      string
	Message   string
}

// kitSpellings are the keys the reference kit spells differently in a kind's
// section, by kind, mapped to the key verifierd reads (docs/contracts.md
// lists them). They mean exactly the same, so they load under the
// canonical key, with a notice naming it.
var kitSpellings = map[string]map[string]string{
	"graphql": {
		"graphql_freshness_field":    "freshness_field",
		"graphql_freshness_window_s": "freshness_window_s",
	},
}

// canonicalSpelling returns sec with each kit spelling of its kind renamed
// to the canonical key, and a notice per renamed key. sec itself is never
// changed (a copy is returned when a key is renamed). A section that writes
// both spellings of one key is refused: two values for one setting leave
// the reader to guess which one counts.
func canonicalSpelling(sec map[string]any, path string, index int) (map[string]any, []Notice, error) {
	kind, _ := sec["kind"].(string)
	spellings := kitSpellings[kind]
	var notices []Notice
	var out map[string]any
	for _, kit := range slices.Sorted(maps.Keys(spellings)) {
		v, ok := sec[kit]
		if !ok {
			continue
		}
		canon := spellings[kit]
		if _, both := sec[canon]; both {
			return nil, nil, errorf(path+"."+kit, "%s is also set; the kit's %s means the same, so write only %s", canon, kit, canon)
		}
		if out == nil {
			out = maps.Clone(sec)
		}
		delete(out, kit)
		out[canon] = v
		notices = append(notices, Notice{Candidate: index, Path: path + "." + kit,
			Message: "read as " + canon + ", the key verifierd spells it with (the reference kit's spelling); write " + canon + " to silence this notice"})
	}
	if out == nil {
		return sec, nil, nil
	}
	return out, notices, nil
}

// noticeGate hands a deployment's notices out once, so a daemon that keeps
// one parsed deployment for many sessions says them once, when it loads it.
type noticeGate struct{ taken atomic.Bool }

// TakeNotices returns the deployment's notices the first time it is
// called on this parse, and nil after: the caller that loads the
// deployment reports them, later users of the same parse do not repeat
// them. Notices keeps them all.
func (d *Deployment) TakeNotices() []Notice {
	if d.gate == nil || len(d.Notices) == 0 || d.gate.taken.Swap(true) {
		return nil
	}
	return d.Notices
}
