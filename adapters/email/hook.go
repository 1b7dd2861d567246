package email

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/verifierd/verifierd/sdk"
)

// ledgerSize is how many after-reads the hook remembers. The daemon asks
// about the last read of a verification right after it, so a few hundred
// cover many verifications in flight.
const ledgerSize = 256

// leak is one message in the hook's scope that went to addresses outside
// expected_recipients.
type leak struct {
	id         string
	unexpected []string
}

// leakCollector finds the leaks of one after-read as its records stream.
// Its scope is the messages matching the read's selector, or every message
// when the daemon sent none (several effects share the read).
type leakCollector struct {
	expected map[string]bool
	selector map[string]string
	found    []leak
}

func (c *leakCollector) add(rec sdk.Record, recipients []string) {
	if c == nil || !selects(rec, c.selector) {
		return
	}
	var unexpected []string
	for _, r := range recipients {
		if !c.expected[r] {
			unexpected = append(unexpected, r)
		}
	}
	if len(unexpected) > 0 {
		id, _ := rec["id"].(string) // the message reader always sets a string id
		c.found = append(c.found, leak{id: id, unexpected: unexpected})
	}
}

// selects reports whether every selector pair equals the record's value as
// the judge reads it (booleans as true/false; a missing value matches
// nothing). The judge decides the verdict; this only finds the messages it
// matched.
func selects(rec sdk.Record, selector map[string]string) bool {
	for k, want := range selector {
		var got string
		switch v := rec[k].(type) {
		case string:
			got = v
		case bool:
			got = strconv.FormatBool(v)
		case json.Number:
			got = v.String()
		default:
			return false
		}
		if got != want {
			return false
		}
	}
	return true
}

// maxNamed is how many leaking messages a reason names.
const maxNamed = 5

// Verdict demotes a CONFIRMED verdict to REFUTED when a message the effect
// matched was also delivered to an address outside expected_recipients. It
// only ever demotes, and only when expected_recipients is configured.
func (s *settings) Verdict(ctx context.Context, req sdk.VerdictRequest) (sdk.Demotion, error) {
	if s.expected == nil || req.Verdict != sdk.VerdictConfirmed {
		return sdk.Demotion{}, nil
	}
	leaks, ok := s.ledger.Get(req.CaptureID)
	if !ok {
		return sdk.Demotion{
			Verdict:    sdk.VerdictIndeterminate,
			ReasonCode: ReasonRecipientsUnknown,
			Message:    "the email adapter no longer holds the judged read (it was restarted or the read was never finished), so its recipients could not be checked against expected_recipients",
		}, nil
	}
	if len(leaks) == 0 {
		return sdk.Demotion{}, nil
	}
	var named []string
	for _, l := range leaks[:min(len(leaks), maxNamed)] {
		named = append(named, fmt.Sprintf("%s to %s", l.id, strings.Join(l.unexpected, ", ")))
	}
	more := ""
	if len(leaks) > maxNamed {
		more = fmt.Sprintf(" and %d more", len(leaks)-maxNamed)
	}
	sdk.Logger(ctx).Info("a matched message reached unexpected recipients", "capture_id", req.CaptureID, "messages", len(leaks))
	return sdk.Demotion{
		Verdict:    sdk.VerdictRefuted,
		ReasonCode: ReasonUnexpectedRecipient,
		Message: fmt.Sprintf("%d matched message(s) were also delivered outside expected_recipients: %s%s",
			len(leaks), strings.Join(named, "; "), more),
	}, nil
}
