package harness

import (
	"fmt"

	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/unstable/strict"
)

// changesFile is a case's changes (docs/contracts.md §3b): the write set.
type changesFile struct {
	Reachable *bool   `json:"reachable" strict:"required"`
	Complete  *bool   `json:"complete"`
	Reason    *string `json:"reason"`
	Changes   []any   `json:"changes"`
}

// changeFile is one change of a write set.
type changeFile struct {
	Op     string `json:"op" strict:"required"`
	Table  string `json:"table" strict:"required"`
	Before any    `json:"before"`
	After  any    `json:"after"`
}

// parseChanges reads a case's changes key, or nil when it has none. The
// shape is checked here (INVALID_CASE); whether the changes fit their ops
// and carry the identity field is the judge's (CHANGES_UNUSABLE).
func parseChanges(m map[string]any) (*judge.WriteSet, error) {
	v, ok := m["changes"]
	if !ok {
		return nil, nil
	}
	var f changesFile
	if err := strict.Decode(v, "changes", &f); err != nil {
		return nil, caseRefusal(err)
	}
	ws := &judge.WriteSet{Reachable: *f.Reachable, Complete: f.Complete != nil && *f.Complete}
	if f.Reason != nil {
		ws.Reason = *f.Reason
	}
	if !ws.Reachable && len(f.Changes) > 0 {
		return nil, invalid("changes.changes", "an unreachable write set has no changes; remove them or set reachable: true")
	}
	if ws.Reachable && f.Complete == nil {
		return nil, invalid("changes.complete", "say whether the write set covers the whole window: complete: true or false")
	}
	for i, raw := range f.Changes {
		path := fmt.Sprintf("changes.changes[%d]", i)
		var cf changeFile
		if err := strict.Decode(raw, path, &cf); err != nil {
			return nil, caseRefusal(err)
		}
		ch := judge.Change{Op: cf.Op, Table: cf.Table}
		var err error
		if ch.Before, err = image(cf.Before, path+".before"); err != nil {
			return nil, err
		}
		if ch.After, err = image(cf.After, path+".after"); err != nil {
			return nil, err
		}
		ws.Changes = append(ws.Changes, ch)
	}
	return ws, nil
}

// image is a change's before or after image: a record, or null for none.
func image(v any, path string) (judge.Record, error) {
	if v == nil {
		return nil, nil
	}
	r, ok := v.(map[string]any)
	if !ok {
		return nil, invalid(path, "an image is a record (a JSON object) or null")
	}
	return r, nil
}
