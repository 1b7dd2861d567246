package receipt

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
)

// Expect is what a caller expects a verdict receipt to be about. An empty
// field is not checked.
type Expect struct {
	Session    string // the payload's session_id
	Deployment string // the payload's deployment.name
	Step       string // the payload's workflow.step
	// AcceptRefusal accepts a receipt of a refused Begin (kind
	// begin_refused: nothing was verified) as matching. Without it a
	// refusal receipt never satisfies an expectation, even one that names
	// its deployment and step: it proves that the step was refused, not
	// that it was verified.
	AcceptRefusal bool
}

// KindBeginRefused is the kind of a verdict receipt that records a refused
// Begin.
const KindBeginRefused = "begin_refused"

// SubjectError names the first expected field a receipt's payload does not
// carry.
type SubjectError struct {
	Field string // "session", "deployment", "step", or "kind" for a refusal receipt not accepted
	Path  string // where in the payload: "session_id", "deployment.name", "workflow.step", "kind"
	Want  string
	Got   string
}

func (e *SubjectError) Error() string {
	if e.Field == "kind" {
		return fmt.Sprintf("the receipt records a refused Begin (kind %s): nothing was verified; accept it only as evidence of the refusal (--accept-refusal, receipt.Expect.AcceptRefusal)", e.Got)
	}
	return fmt.Sprintf("the receipt is about %s %q (%s), not the expected %q", e.Field, e.Got, e.Path, e.Want)
}

// CheckSubject checks that a receipt's payload names the expected
// session, deployment and workflow step (nothing is checked for an empty
// Expect). Give it the payload Open returned: the fields are read from the
// signed bytes, never from anything around the envelope. A valid receipt
// of another session is still a valid receipt; only this check binds it to
// the step the caller asked about. deployment is read as a verdict
// receipt's {"name": …} or as the plain name other payloads carry.
func CheckSubject(payload []byte, want Expect) error {
	if (want == Expect{AcceptRefusal: want.AcceptRefusal}) {
		return nil
	}
	if err := CheckKeys(payload, "the signed payload"); err != nil {
		return err
	}
	var p struct {
		Kind       string          `json:"kind"`
		SessionID  string          `json:"session_id"`
		Deployment json.RawMessage `json:"deployment"`
		Workflow   json.RawMessage `json:"workflow"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return fmt.Errorf("the signed payload names no session, deployment or step: %v", err)
	}
	if p.Kind == KindBeginRefused && !want.AcceptRefusal {
		return &SubjectError{Field: "kind", Path: "kind", Want: "a verified step (verify or reverify)", Got: p.Kind}
	}
	var dep struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(p.Deployment, &dep) != nil {
		_ = json.Unmarshal(p.Deployment, &dep.Name) // a plain name, or none
	}
	var wf struct {
		Step string `json:"step"`
	}
	_ = json.Unmarshal(p.Workflow, &wf) // absent or null: no step
	for _, c := range []struct{ field, path, want, got string }{
		{"session", "session_id", want.Session, p.SessionID},
		{"deployment", "deployment.name", want.Deployment, dep.Name},
		{"step", "workflow.step", want.Step, wf.Step},
	} {
		if c.want != "" && c.want != c.got {
			return &SubjectError{Field: c.field, Path: c.path, Want: c.want, Got: c.got}
		}
	}
	return nil
}

// OpenExpecting is Open followed by CheckSubject: the payload of a receipt
// signed by pub about the expected subject.
func (env *Envelope) OpenExpecting(pub ed25519.PublicKey, want Expect) ([]byte, error) {
	payload, err := env.Open(pub)
	if err != nil {
		return nil, err
	}
	if err := CheckSubject(payload, want); err != nil {
		return nil, err
	}
	return payload, nil
}
