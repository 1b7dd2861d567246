package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// ruleFile is the Prometheus rule file schema, decoded strictly: a key
// Prometheus would not read is an error here too.
type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// exprs collects every "expr" string of a Grafana dashboard.
func exprs(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "expr" {
				*out = append(*out, s)
			} else {
				exprs(e, out)
			}
		}
	case []any:
		for _, e := range x {
			exprs(e, out)
		}
	}
}

var metricName = regexp.MustCompile(`\bverifierd_[a-z_]+\b`)

// exported is the set of metric family names a scrape declares, with a
// histogram's _bucket, _sum and _count series.
func exported(scrape string) map[string]bool {
	out := map[string]bool{}
	for line := range strings.Lines(scrape) {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = true
			if f[3] == "histogram" {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					out[f[2]+s] = true
				}
			}
		}
	}
	return out
}

// TestDashboardAndAlertsMatchTheDaemon: every metric the Grafana dashboard
// (deploy/grafana/verifierd.json) and the Prometheus alert rules
// (deploy/prometheus/alerts.yaml) name is exported by a running daemon,
// right after its start (the series a rate needs start at zero); the rule
// file decodes strictly into Prometheus's schema (and passes `promtool
// check rules` where Debian's prometheus package is installed), and every
// alert has an expression, a severity and a summary.
func TestDashboardAndAlertsMatchTheDaemon(t *testing.T) {
	t.Parallel()
	httpAddr := freeAddr(t)
	d := startDaemon(t, daemonOpts{args: []string{"--http-listen", httpAddr}})
	c := newClinic(t)
	b := d.begin(t, c, "p-monitor", "note")
	c.save(t, "p-monitor", "note", 1)
	d.verify(t, b.SessionID)
	code, scrape := httpDo(t, "GET", httpAddr, "", "/metrics", "", nil)
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	have := exported(scrape)

	raw, err := os.ReadFile("../deploy/grafana/verifierd.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var all []string
	exprs(dash["panels"], &all)
	if len(all) < 10 {
		t.Fatalf("the dashboard has %d queries; want its panels' queries", len(all))
	}

	rawRules, err := os.ReadFile("../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules ruleFile
	dec := yaml.NewDecoder(bytes.NewReader(rawRules))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("alerts.yaml does not decode as a Prometheus rule file: %v", err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: want alert, expr, labels.severity and annotations.summary", r)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
				}
			}
			if strings.Count(r.Expr, "(") != strings.Count(r.Expr, ")") {
				t.Errorf("%s: unbalanced parentheses in %q", r.Alert, r.Expr)
			}
			alerts = append(alerts, r.Alert)
			all = append(all, r.Expr)
		}
	}
	for _, want := range []string{"VerifierdReconciliationQueueGrowing", "VerifierdPluginCrashLoop", "VerifierdStoreIntegrityFailed", "VerifierdKeyMismatch", "VerifierdRequestBudgetExhausted"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alerts.yaml lacks %s", want)
		}
	}
	// The write-set series are per change-log slot: a daemon without a
	// changes: deployment has none. They must be the metrics package's
	// own (internal/metrics TestWriteSetMetrics and the write-set e2e
	// scrape them with a slot).
	writeSetSrc, err := os.ReadFile("../internal/metrics/writeset.go")
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, e := range all {
		for _, m := range metricName.FindAllString(e, -1) {
			named++
			if suffix, ok := strings.CutPrefix(m, "verifierd_write_set_"); ok {
				if !bytes.Contains(writeSetSrc, []byte(`"write_set_`+suffix+`"`)) {
					t.Errorf("%s (in %q) is no write-set metric of internal/metrics", m, e)
				}
				continue
			}
			if !have[m] {
				t.Errorf("%s (in %q) is not exported by the daemon", m, e)
			}
		}
	}
	if named == 0 {
		t.Fatal("no verifierd_ metric named: the check proves nothing")
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		if out, err := exec.Command(promtool, "check", "rules", "../deploy/prometheus/alerts.yaml").CombinedOutput(); err != nil {
			t.Errorf("promtool check rules: %v\n%s", err, out)
		}
	} else {
		t.Log("promtool is not installed: the rule file was checked by a strict decode of its schema only")
	}
}
