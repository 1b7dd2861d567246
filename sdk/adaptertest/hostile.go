package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// HostileValues are the run-parameter values the kit sends in place of
// each of Harness.Params, one at a time: empty, wildcards of the common
// query languages, and values shaped to break out of a SQL string, an LDAP
// filter, a path or a URL. A parameter may also be missing altogether.
// Each must be read as the literal value it is (so it selects no more
// than an ordinary unknown value does) or refused with a *refusal.Error.
var HostileValues = []string{
	"",
	"*",
	"%",
	"_",
	"' OR 1=1 --",
	`" OR ""="`,
	"*)(uid=*",
	")(|(objectClass=*)",
	"../",
	"..",
	"a/../../b",
	"x?y=1&z",
	"x#frag",
}

// nobody is an ordinary value no record holds: what a hostile value is
// compared with.
const nobody = "adaptertest-nobody-7f3a"

// hostileParams replaces each run parameter, one at a time, by nothing and
// by each HostileValues entry. Every such read must select no record that
// the ordinary unknown value nobody does not: a value that widens the read
// was substituted into a query language, path or filter without escaping.
// With Harness.Deployment the section is resolved anew with the hostile
// parameters too, so an option_params option that the adapter substitutes
// unescaped is caught as well.
func (k *kit) hostileParams(t *testing.T) {
	if len(k.h.Params) == 0 {
		t.Skip("Harness.Params is empty: the section binds no run parameter")
	}
	r := k.start(t, k.h.Config(t))
	k.h.Reset(t)
	k.h.WriteCorrect(t)
	k.h.WriteWrongEntity(t)
	for _, name := range slices.Sorted(maps.Keys(k.h.Params)) {
		with := func(v string) map[string]string {
			p := maps.Clone(k.h.Params)
			p[name] = v
			return p
		}
		base, refused := k.readAs(t, r, with(nobody))
		if refused != nil {
			t.Logf("run parameter %q = %q is refused (%v); every hostile value must then select nothing", name, nobody, refused)
		}
		missing := maps.Clone(k.h.Params)
		delete(missing, name)
		cases := []struct {
			what   string
			params map[string]string
		}{{"missing", missing}}
		for _, v := range HostileValues {
			cases = append(cases, struct {
				what   string
				params map[string]string
			}{strconv.Quote(v), with(v)})
		}
		for _, c := range cases {
			got, refused := k.readAs(t, r, c.params)
			if refused != nil {
				continue
			}
			if extra := widened(base, got); len(extra) > 0 {
				t.Errorf("run parameter %q %s reads %d record(s) that an unknown value (%q) does not, e.g. %s: the value reshaped the read. Bind it as data or escape it for its place (sdk/param: BindIn, Expand with an escaper), or refuse it with a *refusal.Error",
					name, describe(c.what), len(extra), nobody, extra[0])
			}
		}
	}
}

func describe(what string) string {
	if what == "missing" {
		return "left out of the run"
	}
	return "set to " + what
}

// readAs configures an instance for params in r's process (resolving the
// deployment anew when the harness has one) and reads after, returning the
// records' keys, or the refusal when the daemon or the adapter refuses
// params. Any other error fails t.
func (k *kit) readAs(t *testing.T, r *running, params map[string]string) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cfg := k.h.Config(t)
	if k.h.Deployment != nil {
		var err error
		if cfg, err = k.h.Deployment(t).Resolve(params); err != nil {
			if ce, ok := errors.AsType[*refusal.Error](err); ok {
				return nil, ce
			}
			t.Fatalf("resolving the deployment: %v", err)
		}
	}
	id, err := r.Configure(ctx, cfg)
	if err != nil {
		if ce, ok := errors.AsType[*refusal.Error](err); ok {
			return nil, ce
		}
		t.Fatalf("Configure with run parameters %v: %v", params, err)
	}
	defer func() {
		if err := r.Release(ctx, id); err != nil {
			t.Errorf("Release of an instance configured for run parameters %v: %v", params, err)
		}
	}()
	req := k.req()
	req.Params = params
	c, err := r.CaptureAfter(ctx, id, req)
	if err != nil {
		if ce, ok := errors.AsType[*refusal.Error](err); ok {
			return nil, ce
		}
		t.Fatalf("CaptureAfter with run parameters %v returned an error; a value the read cannot take is a *refusal.Error, any other value is read as data: %v", params, err)
	}
	recs, err := c.Records()
	if err != nil {
		t.Fatalf("CaptureAfter with run parameters %v: reading its records: %v", params, err)
	}
	if !c.Reachable {
		return nil, nil
	}
	keys := make([]string, 0, len(recs))
	for _, rec := range recs {
		keys = append(keys, k.key(rec))
	}
	return keys, nil
}

// key names a record: its identity, or the whole record when it has none.
func (k *kit) key(rec sdk.Record) string {
	if id, ok := text(rec[k.h.IdentityField]); ok {
		return fmt.Sprintf("%s=%s", k.h.IdentityField, id)
	}
	b, _ := json.Marshal(rec)
	return string(b)
}

// widened returns the keys of got beyond those of base, counting
// repeats.
func widened(base, got []string) []string {
	left := map[string]int{}
	for _, k := range base {
		left[k]++
	}
	var extra []string
	for _, k := range got {
		if left[k] > 0 {
			left[k]--
			continue
		}
		extra = append(extra, k)
	}
	return extra
}
