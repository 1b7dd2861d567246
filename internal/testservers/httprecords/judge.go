package httprecords

import (
	"strings"
	"testing"
	"time"

	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// Read is one capture as the judge sees it.
type Read struct {
	Reachable bool
	Reason    string
	// Code is the capture's code when it answered but is not whole.
	Code    string
	Records []sdk.Record
}

// Judge judges one effect (YAML or JSON, one map) on before and after with
// the daemon's own judge, and returns "VERDICT/class/CODE+CODE". freshness
// is "field=seconds" or "".
func Judge(t testing.TB, effect string, params map[string]string, before, after Read, freshness string) string {
	t.Helper()
	effects, err := judge.ParseEffects([]byte("["+effect+"]"), "effects")
	if err != nil {
		t.Fatalf("effect %s: %v", effect, err)
	}
	c, err := judge.Bind(effects[0], params, "effects[0]")
	if err != nil {
		t.Fatalf("binding %s: %v", effect, err)
	}
	var opts judge.Options
	if freshness != "" {
		f, w, _ := strings.Cut(freshness, "=")
		d, err := time.ParseDuration(w + "s")
		if err != nil {
			t.Fatal(err)
		}
		opts.Freshness = &judge.Freshness{Field: f, WindowS: d.Seconds(), Now: time.Now().UTC()}
	}
	v := judge.Judge(c, snapshot(before), snapshot(after), opts)
	var codes []string
	for _, r := range v.Reasons {
		codes = append(codes, r.Code)
	}
	return string(v.Decision) + "/" + string(v.Class) + "/" + strings.Join(codes, "+")
}

func snapshot(r Read) judge.Snapshot {
	s := judge.Snapshot{Reachable: r.Reachable, Reason: r.Reason, Code: r.Code}
	for _, rec := range r.Records {
		s.Records = append(s.Records, judge.Record(rec))
	}
	return s
}
