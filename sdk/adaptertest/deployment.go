package adaptertest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/unstable/deployment"
	"github.com/verifierd/verifierd/sdk/unstable/yamldoc"
)

// Deployment is a deployment document and the daemon's environment: what
// an operator writes and what the daemon's process holds. The kit turns it
// into the adapter's ConfigureRequest with the daemon's own code
// (sdk/unstable/deployment), so an adapter is qualified against the section shape
// and the secret slots the daemon really sends: an adapter that reads its
// secret under another slot than the one the section declares is
// configured without it, exactly as under the daemon.
type Deployment struct {
	// YAML is a deployment document with an effects: section: kind: with
	// the adapter's section, or candidates:, of which Candidate picks one.
	// It is read with the daemon's YAML reader (sdk/unstable/yamldoc): numbers in
	// their canonical text, duplicate keys and aliases refused.
	YAML string
	// Candidate is the index of the section in effects.candidates; unused
	// with effects.kind.
	Candidate int
	// Env is the daemon's environment: each variable the section's
	// secret_env or *_env keys name, with its value.
	Env map[string]string
}

// Request resolves d as the daemon resolves a plugin's section for a
// session whose run parameters are params (bound into option_params). A
// section the daemon would refuse fails t with the daemon's message.
func (d Deployment) Request(t testing.TB, params map[string]string) sdk.ConfigureRequest {
	t.Helper()
	req, err := d.Resolve(params)
	if err != nil {
		t.Fatalf("the deployment does not resolve as the daemon would resolve it: %v", err)
	}
	return req
}

// Resolve is Request returning the refusal: a *refusal.Error whose Path
// is the refused field ("candidates[0].option_params"), or an error
// naming a document that does not parse.
func (d Deployment) Resolve(params map[string]string) (sdk.ConfigureRequest, error) {
	sec, path, err := d.section()
	if err != nil {
		return sdk.ConfigureRequest{}, err
	}
	parsed, err := deployment.Parse(sec, path, true)
	if err != nil {
		return sdk.ConfigureRequest{}, err
	}
	lookup := func(name string) (string, bool) {
		v, ok := d.Env[name]
		return v, ok
	}
	cfg, secrets, err := parsed.Resolve(params, fmt.Sprintf("candidates[%d]", d.Candidate), lookup, nil)
	if err != nil {
		return sdk.ConfigureRequest{}, err
	}
	return sdk.ConfigureRequest{Kind: parsed.Kind, Config: cfg, Secrets: secrets}, nil
}

// section finds the adapter's section in the document.
func (d Deployment) section() (map[string]any, string, error) {
	tree, err := yamldoc.Decode([]byte(d.YAML))
	if err != nil {
		return nil, "", fmt.Errorf("the deployment does not parse: %w", err)
	}
	top, _ := tree.(map[string]any)
	effects, ok := top["effects"].(map[string]any)
	if !ok {
		return nil, "", errors.New("the deployment has no effects: map")
	}
	if _, ok := effects["kind"]; ok {
		return effects, "effects", nil
	}
	list, _ := effects["candidates"].([]any)
	if d.Candidate < 0 || d.Candidate >= len(list) {
		return nil, "", fmt.Errorf("effects has neither kind: nor a candidates[%d]", d.Candidate)
	}
	sec, ok := list[d.Candidate].(map[string]any)
	if !ok {
		return nil, "", fmt.Errorf("effects.candidates[%d] is not a map", d.Candidate)
	}
	return sec, fmt.Sprintf("effects.candidates[%d]", d.Candidate), nil
}
