package harness

import (
	"errors"
	"fmt"
	"strings"

	"github.com/verifierd/verifierd/internal/compact"
	"github.com/verifierd/verifierd/judge"
)

// fastSnapshot is one read as the fast decoder saw it, checked after the
// whole document has parsed so that a syntax error anywhere wins, as it
// does with Parse.
type fastSnapshot struct {
	present  bool
	notObj   bool // present, not null, not an object
	unknown  string
	reach    any
	hasReach bool
	reason   any
	hasRsn   bool
	code     any
	hasCode  bool
	records  string // "" absent, "null", "list" or "other"
	count    int
	firstBad int
	batch    *judge.Batch
}

// ParseString reads a case as Parse does, with the fast decoder: the reads
// go straight into compact batches (BeforeBatch, AfterBatch) without a map
// per record; the small keys (effects, params, now, freshness) are decoded
// as trees and checked by the same code as Parse. The refusals are Parse's,
// except that a syntax error names its path and byte offset.
func ParseString(input string) (*Case, error) { return parseFast(input, nil) }

// parseFast is ParseString with the reads' large field runs taken from
// arena (nil: the Go heap).
func parseFast(input string, arena compact.Arena) (*Case, error) {
	c, err := parseString(input, len(input) >= parallelBytes, arena)
	if _, syntax := errors.AsType[*syntaxFault](err); syntax {
		// A syntax error while decoding in parallel may come from a wrong
		// guess of where the first read ends: decode again in one pass,
		// which also finds the exact first fault.
		c, err = parseString(input, false, arena)
	}
	if f, syntax := errors.AsType[*syntaxFault](err); syntax {
		return nil, syntaxRefusal(f.err)
	}
	return c, err
}

// parallelBytes is the case size from which ParseString decodes the two
// reads in parallel.
const parallelBytes = 1 << 20

// syntaxFault carries a syntax error out of parseString.
type syntaxFault struct{ err error }

func (f *syntaxFault) Error() string { return f.err.Error() }

// splitPoint guesses where the value of the read starting at pos ends: just
// before the member that names the other read (`, "after":`). The guess is
// checked by decoding; -1 when there is none to make.
func splitPoint(input string, pos int, key string) int {
	other := `"after"`
	if key == "after" {
		other = `"before"`
	}
	for from := pos; ; {
		k := strings.Index(input[from:], other)
		if k < 0 {
			return -1
		}
		at := from + k
		comma := at - 1
		for comma > pos && isSpace(input[comma]) {
			comma--
		}
		colon := at + len(other)
		for colon < len(input) && isSpace(input[colon]) {
			colon++
		}
		if comma > pos && input[comma] == ',' && colon < len(input) && input[colon] == ':' {
			return comma
		}
		from = at + len(other)
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func parseString(input string, parallel bool, arena compact.Arena) (*Case, error) {
	sc := compact.NewScanner(input)
	sc.SetArena(arena)
	if sc.Peek() != '{' {
		if _, err := sc.Value(""); err != nil {
			return nil, &syntaxFault{err}
		}
		if err := sc.End(); err != nil {
			return nil, &syntaxFault{err}
		}
		return nil, invalid("", "a case is a JSON object with %s", knownCaseKeys)
	}
	m := map[string]any{}
	snaps := map[string]*fastSnapshot{"before": {}, "after": {}}
	// In parallel, the first read is decoded on its own goroutine while
	// this one reads the rest of the document (the other read, the
	// contracts).
	var side chan error
	err := sc.Object("", func(key, path string) error {
		if snap, ok := snaps[key]; ok {
			if side == nil && parallel && sc.Peek() == '{' {
				end := splitPoint(input, sc.Pos(), key)
				if end < 0 {
					return readSnapshot(sc, path, snap)
				}
				sub := sc.SplitAt(end)
				side = make(chan error, 1)
				go func() {
					err := readSnapshot(sub, path, snap)
					if err == nil {
						err = sub.End()
					}
					side <- err
				}()
				return nil
			}
			return readSnapshot(sc, path, snap)
		}
		v, err := sc.Value(path)
		if err != nil {
			return err
		}
		m[key] = v
		return nil
	})
	if err == nil {
		err = sc.End()
	}
	if side != nil {
		err = firstError(err, <-side)
	}
	if err != nil {
		return nil, &syntaxFault{err}
	}
	c := &Case{compact: true}
	err = build(c, m, func(key string) error {
		snap, err := checkSnapshot(snaps[key], key)
		if key == "before" {
			c.BeforeBatch = snap
			c.Before = judge.Snapshot{Reachable: snap.Reachable, Reason: snap.Reason, Code: snap.Code}
		} else {
			c.AfterBatch = snap
			c.After = judge.Snapshot{Reachable: snap.Reachable, Reason: snap.Reason, Code: snap.Code}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// firstError returns the error found earlier in the document.
func firstError(a, b error) error {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	sa, okA := errors.AsType[*judge.SyntaxError](a)
	sb, okB := errors.AsType[*judge.SyntaxError](b)
	if okA && okB && sb.Offset < sa.Offset {
		return b
	}
	return a
}

func syntaxRefusal(err error) error {
	if se, ok := errors.AsType[*judge.SyntaxError](err); ok {
		return invalid(se.Path, "the case is not valid JSON: %v", se)
	}
	return invalid("", "the case is not valid JSON: %v", err)
}

func readSnapshot(sc *compact.Scanner, path string, snap *fastSnapshot) error {
	snap.present = true
	if sc.Peek() != '{' {
		v, err := sc.Value(path)
		if err != nil {
			return err
		}
		if v == nil {
			snap.present = false
		} else {
			snap.notObj = true
		}
		return nil
	}
	return sc.Object(path, func(key, kpath string) error {
		switch key {
		case "records":
			if sc.Peek() == '[' {
				snap.batch = compact.NewBatch()
				n, bad, err := sc.Records(kpath, snap.batch)
				snap.records, snap.count, snap.firstBad = "list", n, bad
				return err
			}
			v, err := sc.Value(kpath)
			snap.records = "other"
			if v == nil {
				snap.records = "null"
			}
			return err
		case "reachable":
			v, err := sc.Value(kpath)
			snap.reach, snap.hasReach = v, true
			return err
		case "reason":
			v, err := sc.Value(kpath)
			snap.reason, snap.hasRsn = v, true
			return err
		case "code":
			v, err := sc.Value(kpath)
			snap.code, snap.hasCode = v, true
			return err
		}
		if snap.unknown == "" {
			snap.unknown = key
		}
		_, err := sc.Value(kpath)
		return err
	})
}

// checkSnapshot applies parseSnapshot's rules, in its order.
func checkSnapshot(snap *fastSnapshot, key string) (judge.BatchSnapshot, error) {
	if !snap.present {
		return judge.BatchSnapshot{}, invalid(key, "missing; write {\"reachable\": true, \"records\": [...]} or {\"reachable\": false}")
	}
	if snap.notObj {
		return judge.BatchSnapshot{}, invalid(key, "must be an object {reachable, records}")
	}
	if snap.unknown != "" {
		return judge.BatchSnapshot{}, invalid(key+"."+snap.unknown, "unknown key %q (known: reachable, records, reason, code)", snap.unknown)
	}
	reachable, isBool := snap.reach.(bool)
	if !isBool {
		return judge.BatchSnapshot{}, invalid(key+".reachable", "reachable must be true or false")
	}
	out := judge.BatchSnapshot{Reachable: reachable}
	if snap.hasRsn {
		s, isStr := snap.reason.(string)
		if !isStr {
			return judge.BatchSnapshot{}, invalid(key+".reason", "reason must be text")
		}
		out.Reason = s
	}
	if snap.hasCode {
		s, err := readCode(snap.code, key, reachable)
		if err != nil {
			return judge.BatchSnapshot{}, err
		}
		out.Code = s
	}
	if !reachable {
		if snap.records == "other" || (snap.records == "list" && snap.count > 0) {
			return judge.BatchSnapshot{}, invalid(key+".records", "an unreachable read has no records; remove them or set reachable: true")
		}
		return out, nil
	}
	if snap.records != "list" {
		return judge.BatchSnapshot{}, invalid(key+".records", "a reachable read needs records: a list of objects ([] for none)")
	}
	if snap.firstBad >= 0 {
		return judge.BatchSnapshot{}, invalid(fmt.Sprintf("%s.records[%d]", key, snap.firstBad), "a record must be a JSON object")
	}
	out.Batch = snap.batch
	return out, nil
}
