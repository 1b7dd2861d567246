package judge

import (
	"fmt"
	"slices"
	"strings"
)

// RedactedMarker replaces a redacted value in evidence.
const RedactedMarker = "[REDACTED]"

// Redaction is a deployment's evidence-minimisation policy: either a
// denylist (evidence_redact_fields) or an allowlist (evidence_keep_fields).
type Redaction struct {
	RedactFields []string
	KeepFields   []string
}

// Validate refuses a policy that sets both lists; path names the section.
func (p Redaction) Validate(path string) error {
	if len(p.RedactFields) > 0 && len(p.KeepFields) > 0 {
		return refuse(path, "set evidence_redact_fields or evidence_keep_fields, not both")
	}
	for i, f := range append(append([]string{}, p.RedactFields...), p.KeepFields...) {
		if f == "" {
			return refuse(fmt.Sprintf("%s[%d]", path, i), "a field name must not be empty")
		}
	}
	return nil
}

// Active reports whether the policy redacts anything.
func (p Redaction) Active() bool { return len(p.RedactFields) > 0 || len(p.KeepFields) > 0 }

// redacts reports whether the field's values are masked. "*" stands for a
// whole record quoted as its identity, masked under any active policy.
func (p Redaction) redacts(field string) bool {
	if !p.Active() {
		return false
	}
	if field == "*" {
		return true
	}
	if len(p.KeepFields) > 0 {
		return !slices.Contains(p.KeepFields, field)
	}
	return slices.Contains(p.RedactFields, field)
}

// Apply returns a copy of v with redacted fields masked in the matched
// records, the observed and expected values (when the read-back field is
// redacted), the reason messages and, when the identity field is redacted,
// every entry of Lost, Changed and Unexplained (their lengths are kept).
// The decision, class, counts, codes and hash never change.
func (p Redaction) Apply(v Verdict, c *Contract) Verdict {
	if !p.Active() {
		return v
	}
	out := v
	if v.Matched != nil {
		out.Matched = make([]Record, len(v.Matched))
		for i, r := range v.Matched {
			cp := make(Record, len(r))
			for k, val := range r {
				if p.redacts(k) {
					cp[k] = RedactedMarker
				} else {
					cp[k] = val
				}
			}
			out.Matched[i] = cp
		}
	}
	if c != nil && c.Kind == FieldEquals && p.redacts(c.Field) {
		m := RedactedMarker
		if v.ObservedValue != nil {
			out.ObservedValue = &m
		}
		if v.ExpectedValue != nil {
			out.ExpectedValue = &m
		}
	}
	if c != nil && p.redacts(c.IdentityField) {
		out.Lost, out.Changed, out.Unexplained = maskAll(v.Lost), maskAll(v.Changed), maskAll(v.Unexplained)
	}
	out.Reasons = make([]Reason, len(v.Reasons))
	for i, r := range v.Reasons {
		msg := r.Message
		for _, s := range r.shown {
			if p.redacts(s.field) {
				msg = strings.ReplaceAll(msg, s.quoted, `"`+RedactedMarker+`"`)
			}
		}
		out.Reasons[i] = Reason{Code: r.Code, Message: msg}
	}
	return out
}

// maskAll is ids with every entry masked (the count is kept).
func maskAll(ids []string) []string {
	if ids == nil {
		return nil
	}
	out := make([]string, len(ids))
	for i := range out {
		out[i] = RedactedMarker
	}
	return out
}
