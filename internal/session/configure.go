package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/telemetry"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// configureUse is what a deployment's configured candidates serve.
type configureUse int

const (
	// forSession: a session's Begin or Verify. Every capture binds the
	// run parameters, refusing as CheckParams would, so the adapter is
	// not asked to check them when configured (one round trip fewer), and
	// the configuration runs in a span of its own.
	forSession configureUse = iota + 1
	// forCheck: a preflight, an artifact check or a reward read; the
	// adapter checks the run parameters when configured.
	forCheck
)

// configurer builds (or reuses) the adapter instances of a deployment's
// candidates: it resolves each candidate's section and secrets under the
// daemon's secrets.allow and asks the plugin host for the instance.
type configurer struct {
	host      *pluginhost.Host
	lookupEnv func(string) (string, bool)
	allow     func(string) bool
}

// newConfigurer configures through host, resolving secret references
// with lookupEnv under daemon's secrets.allow (no secret is allowed
// without a daemon config).
func newConfigurer(host *pluginhost.Host, lookupEnv func(string) (string, bool), daemon *config.Daemon) *configurer {
	allow := func(string) bool { return false }
	if daemon != nil {
		allow = daemon.AllowSecret
	}
	return &configurer{host: host, lookupEnv: lookupEnv, allow: allow}
}

// configurer is the Manager's configurer, over its host, environment and
// daemon config.
func (m *Manager) configurer() *configurer {
	return newConfigurer(m.host, m.lookupEnv, m.daemon)
}

// configure builds (or reuses) every candidate's adapter instance for use;
// errs[i] is candidate i's refusal.
func (m *Manager) configure(ctx context.Context, dep *config.Deployment, contracts []*judge.Contract, params map[string]string, use configureUse) ([]*pluginhost.Instance, []error) {
	if use != forSession {
		return m.configurer().configure(ctx, dep, contracts, params, false)
	}
	ctx, span := telemetry.Start(ctx, telemetry.SpanConfigure, telemetry.KeyCandidates.Int(len(dep.Candidates)))
	defer span.End()
	insts, errs := m.configurer().configure(ctx, dep, contracts, params, true)
	for _, err := range errs {
		if err != nil {
			telemetry.Fail(span, errKind(err))
			break
		}
	}
	return insts, errs
}

// configure configures every candidate; paramsChecked tells the host the
// adapter need not check the run parameters when configured.
func (c *configurer) configure(ctx context.Context, dep *config.Deployment, contracts []*judge.Contract, params map[string]string, paramsChecked bool) ([]*pluginhost.Instance, []error) {
	insts := make([]*pluginhost.Instance, len(dep.Candidates))
	errs := make([]error, len(dep.Candidates))
	for i := range dep.Candidates {
		cand := &dep.Candidates[i]
		cfg, secrets, err := c.resolve(cand, params, candidatePath(dep, i))
		if err != nil {
			errs[i] = err
			continue
		}
		inst, err := c.host.Instance(ctx, pluginhost.Spec{
			Kind: cand.Kind, ConfigJSON: cfg, Params: params, Secrets: secrets,
			EffectTimeout: effectTimeout(contracts), ParamsChecked: paramsChecked,
		})
		if err != nil {
			errs[i] = candidateError(dep, i, err)
			continue
		}
		insts[i] = inst
	}
	return insts, errs
}

// resolve is the candidate's section (JSON) and secrets for params. A
// refusal of the deployment (a secret reference, an option parameter)
// refuses the session at its path in the deployment, classified by its
// code (resolveReason); any other failure refuses it at path as the
// platform's.
func (c *configurer) resolve(cand *config.Candidate, params map[string]string, path string) ([]byte, map[string]string, error) {
	cfg, secrets, err := cand.Resolve(params, c.lookupEnv, c.allow)
	if err == nil {
		return cfg, secrets, nil
	}
	if ce, ok := errors.AsType[*refusal.Error](err); ok {
		return nil, nil, &Error{Kind: Refused, Reason: resolveReason(ce.Code), Path: "deployment.effects." + ce.Path, Message: ce.Message}
	}
	return nil, nil, &Error{Kind: Refused, Reason: reasonPlatform, Path: path, Message: err.Error()}
}

// candidatePath is the path of candidate i in the deployment.
func candidatePath(dep *config.Deployment, i int) string {
	if len(dep.Candidates) == 1 {
		return "deployment.effects"
	}
	return fmt.Sprintf("deployment.effects.candidates[%d]", i)
}

// candidateError is the refusal for candidate i's configuration or run
// parameters: the adapter's refusal (a *refusal.Error) is INVALID at
// its path inside the candidate; anything else means the candidate is not
// available.
func candidateError(dep *config.Deployment, i int, err error) error {
	path := candidatePath(dep, i)
	if ce, ok := errors.AsType[*refusal.Error](err); ok {
		if ce.Path != "" {
			path += "." + ce.Path
		}
		return &Error{Kind: Invalid, Path: path, Message: ce.Message}
	}
	return &Error{Kind: Refused, Reason: reasonPlatform, Path: path, Message: fmt.Sprintf("candidate %d (%s) is not available: %v", i, dep.Candidates[i].Kind, err)}
}
