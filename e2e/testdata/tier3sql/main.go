// Command tier3sql is a test-only adapter (kind "tier3-sql"): the
// first-party sql adapter reading the same real SQLite database, reporting
// tier 3 (re-acquired state) instead of 1. It stands for a weaker reading
// mechanism so that an end-to-end test can see a run's tier floor
// (policy.run_min_tier) refuse VERIFIED; only the tier is made up.
package main

import (
	"context"
	"encoding/json"

	"github.com/verifierd/verifierd/adapters/sql"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/plugin"
)

type tier3 struct{ sdk.Adapter }

func (a tier3) Info() sdk.Info {
	info := a.Adapter.Info()
	info.Kind, info.Tier = "tier3-sql", sdk.TierReacquiredState
	return info
}

// Configure hands the section to the sql adapter as its own kind.
func (a tier3) Configure(ctx context.Context, req sdk.ConfigureRequest) error {
	var section map[string]json.RawMessage
	if err := json.Unmarshal(req.Config, &section); err != nil {
		return err
	}
	section["kind"] = json.RawMessage(`"sql"`)
	raw, err := json.Marshal(section)
	if err != nil {
		return err
	}
	req.Kind, req.Config = "sql", raw
	return a.Adapter.Configure(ctx, req)
}

// CheckParams passes the sql adapter's own check through.
func (a tier3) CheckParams(ctx context.Context, params map[string]string) error {
	if pc, ok := a.Adapter.(sdk.ParamChecker); ok {
		return pc.CheckParams(ctx, params)
	}
	return nil
}

func main() { plugin.Main(func() sdk.Adapter { return tier3{sql.New()} }) }
