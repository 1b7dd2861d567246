package session

import (
	"errors"
	"fmt"
	"time"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// Parsed deployments and effects lists, cached by content (doccache.go).
// Both parsers are pure and their results are never mutated.
var (
	parsedDeployments = newDocCache[*config.Deployment](docCacheEntries, docCacheBytes)
	parsedEffects     = newDocCache[[]judge.Effect](docCacheEntries, docCacheBytes)
)

// parseDeployment parses a deployment within the limits, or takes it from
// the cache. The caller caches it once the whole request has been accepted.
func parseDeployment(data []byte) (*config.Deployment, bool, error) {
	if d, ok := parsedDeployments.get(docKey(data)); ok {
		return d, true, nil
	}
	if err := checkDocument("deployment", data); err != nil {
		return nil, false, err
	}
	tree, err := judge.DecodeDocument(data)
	if err == nil {
		if err := checkDepth("deployment", tree); err != nil {
			return nil, false, err
		}
	} else if deep := tooDeep("deployment", err); deep != nil {
		return nil, false, deep
	} // a document that does not decode otherwise is refused by ParseDeployment below
	dep, err := config.ParseDeployment(data)
	if err != nil {
		if ce, ok := errors.AsType[*refusal.Error](err); ok {
			return nil, false, &Error{Kind: Invalid, Path: "deployment." + clipMsg(ce.Path), Message: clipMsg(ce.Message)}
		}
		return nil, false, &Error{Kind: Invalid, Path: "deployment", Message: clipMsg(err.Error())}
	}
	if len(dep.Candidates) > MaxCandidates {
		return nil, false, overLimit("deployment.effects.candidates", len(dep.Candidates), MaxCandidates, "candidates", "keep the strongest few")
	}
	for i, c := range dep.Candidates {
		if len(c.Kind) > MaxNameBytes {
			return nil, false, overLimit(fmt.Sprintf("deployment.effects.candidates[%d].kind", i), len(c.Kind), MaxNameBytes, "bytes", "name an installed adapter kind")
		}
	}
	return dep, false, nil
}

// parse loads the deployment and the contracts and binds the contracts.
// Documents enter the cache only when the whole step is accepted.
func parse(deployment, effects []byte, params map[string]string) (*config.Deployment, []*judge.Contract, error) {
	if err := checkParams(params); err != nil {
		return nil, nil, err
	}
	dep, depCached, err := parseDeployment(deployment)
	if err != nil {
		return nil, nil, err
	}
	effKey := docKey(effects)
	list, effCached := parsedEffects.get(effKey)
	if !effCached {
		if list, err = parseEffectsDoc(effects); err != nil {
			return nil, nil, err
		}
	}
	if len(list) == 0 {
		return nil, nil, &Error{Kind: Invalid, Code: judge.CodeInvalidContract, Path: "effects", Message: "no effects declared; a step with no contract proves nothing"}
	}
	contracts := make([]*judge.Contract, len(list))
	for i, e := range list {
		c, err := judge.Bind(e, params, fmt.Sprintf("effects[%d]", i))
		if err != nil {
			return nil, nil, judgeError(err)
		}
		contracts[i] = c
	}
	if !depCached {
		parsedDeployments.put(docKey(deployment), len(deployment), dep)
	}
	if !effCached {
		parsedEffects.put(effKey, len(effects), list)
	}
	return dep, contracts, nil
}

// effectTimeout is the longest settlement window among contracts.
func effectTimeout(contracts []*judge.Contract) time.Duration {
	var max float64
	for _, c := range contracts {
		if c.TimeoutS > max {
			max = c.TimeoutS
		}
	}
	return seconds(max)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
