package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
)

// Daemon is the daemon's own configuration file (verifierd --config FILE).
// Every field is optional; the zero value runs on embedded defaults.
type Daemon struct {
	// Plugins pins plugin binaries by SHA-256, keyed by kind
	// (verifier-adapter-<kind>). A pinned binary whose digest differs is
	// refused before it runs.
	Plugins map[string]PluginConfig `json:"plugins"`
	// Secrets limits which environment variables a deployment may name.
	Secrets SecretsConfig `json:"secrets"`
	// API secures the public gRPC API.
	API APIConfig `json:"api"`
	// Deployments names deployment files that a Begin may refer to by name.
	Deployments map[string]string `json:"deployments"`
	// Workflows names reviewed workflow files (verifierd.workflow/v1) whose
	// steps carry the contracts a Begin may name instead of sending effects.
	Workflows map[string]string `json:"workflows"`
	// Rewards names reward-contract directories (contract.yaml,
	// required_effects.yaml, forbidden_effects.yaml, certificate.json);
	// see docs/rewards.md.
	Rewards map[string]string `json:"rewards"`
	// RewardsTrust lists further public keys (base64 of the raw 32 bytes)
	// whose signature a reward certificate may carry besides the daemon's.
	RewardsTrust []string `json:"rewards_trust"`
	// Policy is the base layer of the contract guards (nil: the defaults).
	// A registered deployment's or workflow's own policy: overrides it.
	Policy *workflow.Policy `json:"-"`
}

// daemonFile is the file's shape, for the strict decoder (sdk/unstable/strict):
// Daemon's keys, and policy, which workflow.ParsePolicy reads as it reads
// a deployment's or a workflow's.
type daemonFile struct {
	Daemon
	Policy any `json:"policy"`
}

// PluginConfig is one plugin's settings.
type PluginConfig struct {
	SHA256 string `json:"sha256"`
}

// SecretsConfig lists the environment variables deployments may name: exact
// names, or prefixes ending in '*'. An empty list allows none, so that a
// deployment sent by a client cannot read the daemon's environment.
type SecretsConfig struct {
	Allow []string `json:"allow"`
}

// APIConfig secures the public API.
type APIConfig struct {
	// BearerTokenEnv names the variable holding the token clients must send
	// as "authorization: Bearer <token>". Empty: no token required.
	BearerTokenEnv string `json:"bearer_token_env"`
	TLSCertFile    string `json:"tls_cert_file"`
	TLSKeyFile     string `json:"tls_key_file"`
}

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// LoadDaemon reads and checks a daemon config file. Relative deployment
// paths are resolved against the file's folder.
func LoadDaemon(path string) (*Daemon, error) {
	f, err := workflow.ReadFile(path, "daemon config", parseDaemon)
	if err != nil {
		return nil, err
	}
	d := f.Daemon
	if f.Policy != nil {
		p, err := workflow.ParsePolicy(f.Policy, "policy")
		if err != nil {
			return nil, err
		}
		d.Policy = p
	}
	for kind, p := range d.Plugins {
		p.SHA256 = strings.TrimPrefix(strings.ToLower(p.SHA256), "sha256:")
		if p.SHA256 != "" && !sha256RE.MatchString(p.SHA256) {
			return nil, errorf("plugins."+kind+".sha256", "must be 64 hex digits (sha256sum of the binary)")
		}
		d.Plugins[kind] = p
	}
	for i, a := range d.Secrets.Allow {
		if !envNameRE.MatchString(strings.TrimSuffix(a, "*")) {
			return nil, errorf(fmt.Sprintf("secrets.allow[%d]", i), "must be a variable name or a prefix ending in *")
		}
	}
	if d.API.BearerTokenEnv != "" && !envNameRE.MatchString(d.API.BearerTokenEnv) {
		return nil, errorf("api.bearer_token_env", "must be an environment-variable name")
	}
	if (d.API.TLSCertFile == "") != (d.API.TLSKeyFile == "") {
		return nil, errorf("api", "set both tls_cert_file and tls_key_file, or neither")
	}
	for name, p := range d.Deployments {
		if !filepath.IsAbs(p) {
			d.Deployments[name] = filepath.Join(filepath.Dir(path), p)
		}
	}
	for name, p := range d.Workflows {
		if p == "" {
			return nil, errorf("workflows."+name, "give the path of the workflow file")
		}
		if !filepath.IsAbs(p) {
			d.Workflows[name] = filepath.Join(filepath.Dir(path), p)
		}
	}
	for name, p := range d.Rewards {
		if p == "" {
			return nil, errorf("rewards."+name, "give the path of the reward contract directory")
		}
		if !filepath.IsAbs(p) {
			d.Rewards[name] = filepath.Join(filepath.Dir(path), p)
		}
	}
	return &d, nil
}

// parseDaemon decodes a daemon config document, before LoadDaemon's checks.
func parseDaemon(data []byte) (*daemonFile, error) {
	tree, err := judge.DecodeDocument(data)
	if err != nil {
		return nil, fmt.Errorf("cannot parse: %w", err)
	}
	var f daemonFile
	if err := workflow.Decode(tree, "", &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// AllowSecret reports whether a deployment may name the variable.
func (d *Daemon) AllowSecret(name string) bool {
	for _, a := range d.Secrets.Allow {
		if before, ok := strings.CutSuffix(a, "*"); ok {
			if strings.HasPrefix(name, before) {
				return true
			}
		} else if a == name {
			return true
		}
	}
	return false
}
