package httpx

import (
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/verifierd/verifierd/sdk/param"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// Endpoint is the part of an HTTP section that names the server and how to
// trust it. An adapter's config struct embeds it, so its keys sit at the
// top of the section beside the adapter's own, and the SDK's strict
// decoder (sdk.ConfigureRequest.DecodeConfig) refuses any other key.
type Endpoint struct {
	// BaseURL is the server's http or https URL (base_url).
	BaseURL string `json:"base_url"`
	// VerifyTLS checks the server's certificate (verify_tls, default true).
	VerifyTLS *bool `json:"verify_tls"`
	// CAFile is a PEM bundle trusted in addition to the system's roots
	// (ca_file).
	CAFile string `json:"ca_file"`
}

// URL checks base_url: see ParseBaseURL.
func (e Endpoint) URL() (*url.URL, error) { return ParseBaseURL("base_url", e.BaseURL) }

// Auth is an `auth:` map: exactly one of bearer_env, basic_env, or header
// with value_env. Each *_env names an environment variable; the daemon
// resolves it and delivers the value in the secrets, keyed by the key's
// dotted path (auth.bearer_env). A nil field is an absent (or null) key.
type Auth struct {
	BearerEnv *string `json:"bearer_env"`
	Header    *string `json:"header"`
	ValueEnv  *string `json:"value_env"`
	BasicEnv  *string `json:"basic_env"`
}

// DefaultMaxPages bounds the pages one paged read follows unless its
// max_pages option says otherwise.
const DefaultMaxPages = 100

// MaxPages reads a max_pages option at path: DefaultMaxPages when v is
// nil, else a whole number from 1 to 100,000.
func MaxPages(path string, v *int) (int, error) {
	return IntIn(path, v, DefaultMaxPages, 1, 100_000)
}

// IntIn returns *v, def when v is nil, refusing values outside [lo, hi] at
// path.
func IntIn(path string, v *int, def, lo, hi int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < lo || *v > hi {
		return 0, &refusal.Error{Path: path, Message: fmt.Sprintf("must be a whole number from %d to %d", lo, hi)}
	}
	return *v, nil
}

// Values reads the map of value expressions at path, to be bound per call
// (empty when raw is nil).
func Values(path string, raw map[string]json.RawMessage) (param.Values, error) {
	if raw == nil {
		return param.Values{}, nil
	}
	return param.ParseMap(raw, path)
}
