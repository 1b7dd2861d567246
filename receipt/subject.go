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
}

// SubjectError names the first expected field a receipt's payload does not
// carry.
type SubjectError struct {
	Field string // "session", "deployment" or "step"
	Path  string // where in the payload: "session_id", "deployment.name", "workflow.step"
	Want  string
	Got   string
}

func (e *SubjectError) Error() string {
	return fmt.Sprintf("the receipt is about %s %q (%s), not the expected %q", e.Field, e.Got, e.Path, e.Want)
}

// CheckSubject checks that a verdict receipt's payload names the expected
// session, deployment and workflow step. Give it the payload Open returned:
// the fields are read from the signed bytes, never from anything around
// the envelope. A valid receipt of another session is still a valid
// receipt; only this check binds it to the step the caller asked about.
func CheckSubject(payload []byte, want Expect) error {
	var p struct {
		SessionID  string `json:"session_id"`
		Deployment struct {
			Name string `json:"name"`
		} `json:"deployment"`
		Workflow *struct {
			Step string `json:"step"`
		} `json:"workflow"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return fmt.Errorf("the signed payload is not a verdict receipt: %v", err)
	}
	step := ""
	if p.Workflow != nil {
		step = p.Workflow.Step
	}
	for _, c := range []struct{ field, path, want, got string }{
		{"session", "session_id", want.Session, p.SessionID},
		{"deployment", "deployment.name", want.Deployment, p.Deployment.Name},
		{"step", "workflow.step", want.Step, step},
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
