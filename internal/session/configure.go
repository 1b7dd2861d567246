package session

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/telemetry"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// configureTraced is configure in a span of its own.
func (m *Manager) configureTraced(ctx context.Context, dep *config.Deployment, contracts []*judge.Contract, params map[string]string, checked bool) ([]*pluginhost.Instance, []error) {
	ctx, span := telemetry.Start(ctx, telemetry.SpanConfigure, telemetry.KeyCandidates.Int(len(dep.Candidates)))
	defer span.End()
	insts, errs := m.configureChecked(ctx, dep, contracts, params, checked)
	for _, err := range errs {
		if err != nil {
			telemetry.Fail(span, errKind(err))
			break
		}
	}
	return insts, errs
}

// configure builds (or reuses) every candidate's adapter instance.
func (m *Manager) configure(ctx context.Context, dep *config.Deployment, contracts []*judge.Contract, params map[string]string) ([]*pluginhost.Instance, []error) {
	return m.configureChecked(ctx, dep, contracts, params, false)
}

// configureChecked is configure; checked says the parameters were checked
// when the session began, so the adapter is not asked again (one round
// trip fewer on Verify).
func (m *Manager) configureChecked(ctx context.Context, dep *config.Deployment, contracts []*judge.Contract, params map[string]string, checked bool) ([]*pluginhost.Instance, []error) {
	insts := make([]*pluginhost.Instance, len(dep.Candidates))
	errs := make([]error, len(dep.Candidates))
	allow := func(string) bool { return false }
	if m.Daemon != nil {
		allow = m.Daemon.AllowSecret
	}
	for i := range dep.Candidates {
		c := &dep.Candidates[i]
		path := candidatePath(dep, i)
		cfg, secrets, err := c.Resolve(params, m.lookupEnv, allow)
		if err != nil {
			if ce, ok := errors.AsType[*config.Error](err); ok {
				// A secret outside secrets.allow is the operator's policy;
				// a secret missing from the environment is the platform's.
				reason := reasonPlatform
				if strings.Contains(ce.Message, "secrets.allow") {
					reason = reasonPolicy
				}
				errs[i] = &Error{Kind: Refused, Reason: reason, Path: "deployment.effects." + ce.Path, Message: ce.Message}
			} else {
				errs[i] = &Error{Kind: Refused, Reason: reasonPlatform, Path: path, Message: err.Error()}
			}
			continue
		}
		inst, err := m.Host.Instance(ctx, pluginhost.Spec{
			Kind: c.Kind, ConfigJSON: cfg, Params: params, Secrets: secrets,
			EffectTimeout: effectTimeout(contracts), ParamsChecked: checked,
		})
		if err != nil {
			errs[i] = candidateError(dep, i, err)
			continue
		}
		insts[i] = inst
	}
	return insts, errs
}

// candidatePath is the path of candidate i in the deployment.
func candidatePath(dep *config.Deployment, i int) string {
	if len(dep.Candidates) == 1 {
		return "deployment.effects"
	}
	return fmt.Sprintf("deployment.effects.candidates[%d]", i)
}

// candidateError is the refusal for candidate i's configuration or run
// parameters: the adapter's refusal (a *sdk.ConfigError) is INVALID at
// its path inside the candidate; anything else means the candidate is not
// available.
func candidateError(dep *config.Deployment, i int, err error) error {
	path := candidatePath(dep, i)
	if ce, ok := errors.AsType[*sdk.ConfigError](err); ok {
		if ce.Path != "" {
			path += "." + ce.Path
		}
		return &Error{Kind: Invalid, Path: path, Message: ce.Message}
	}
	return &Error{Kind: Refused, Reason: reasonPlatform, Path: path, Message: fmt.Sprintf("candidate %d (%s) is not available: %v", i, dep.Candidates[i].Kind, err)}
}
