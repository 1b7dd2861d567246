package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/verifierd/verifierd/judge/harness"
)

// verifyctlBin is the verifyctl binary built once for the whole package.
var verifyctlBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "verifyctl-test")
	if err != nil {
		panic(err)
	}
	verifyctlBin = filepath.Join(dir, "verifyctl")
	if runtime.GOOS == "windows" {
		verifyctlBin += ".exe"
	}
	build := exec.Command("go", "build", "-o", verifyctlBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("building verifyctl: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// conformanceCase is one case file: a case and its expected answer.
type conformanceCase struct {
	Name   string          `json:"name"`
	Case   json.RawMessage `json:"case"`
	Expect struct {
		Exit      int    `json:"exit"`
		ErrorCode string `json:"error_code"`
		Outcome   string `json:"outcome"`
		Effects   []struct {
			Verdict       string   `json:"verdict"`
			Result        string   `json:"result"`
			Codes         []string `json:"codes"`
			ObservedCount *int     `json:"observed_count"`
			ContractHash  string   `json:"contract_hash"`
		} `json:"effects"`
	} `json:"expect"`
}

// caseDirs are the bundled cases and any folders named in
// VERIFIERD_CASES_DIRS (colon-separated), e.g. a newer set of cases.
func caseDirs(t *testing.T) []string {
	dirs := []string{"testdata/cases"}
	if extra := os.Getenv("VERIFIERD_CASES_DIRS"); extra != "" {
		dirs = append(dirs, strings.Split(extra, ":")...)
	}
	return dirs
}

func loadCases(t *testing.T) map[string]conformanceCase {
	t.Helper()
	cases := map[string]conformanceCase{}
	for _, dir := range caseDirs(t) {
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var c conformanceCase
			if err := json.Unmarshal(data, &c); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if c.Name == "" {
				c.Name = strings.TrimSuffix(filepath.Base(f), ".json")
			}
			cases[c.Name] = c
		}
	}
	if len(cases) < 34 {
		t.Fatalf("found %d conformance cases, want at least the 34 bundled ones", len(cases))
	}
	return cases
}

// TestConformance runs every case twice: through harness.Run in-process and
// through the built verifyctl binary reading the case on stdin. Both must
// match the expectation and each other byte for byte.
func TestConformance(t *testing.T) {
	cases := loadCases(t)
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, name := range names {
		c := cases[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			inOut, inCode := harness.Run(c.Case, now)
			checkCase(t, "in-process", c, inOut, inCode)

			cmd := exec.Command(verifyctlBin, "judge", "--case", "-")
			cmd.Stdin = bytes.NewReader(c.Case)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := errors.AsType[*exec.ExitError](err); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("running verifyctl: %v", err)
			}
			checkCase(t, "verifyctl", c, stdout.Bytes(), code)
			if !needsClock(c.Case) {
				if diff := cmp.Diff(string(inOut), stdout.String()); diff != "" {
					t.Errorf("in-process and verifyctl output differ (-in-process +verifyctl):\n%s", diff)
				}
			}
		})
	}
}

// needsClock reports whether a case uses freshness without its own now, so
// that the in-process run and the binary see different wall clocks.
func needsClock(raw json.RawMessage) bool {
	var c struct {
		Now       *string         `json:"now"`
		Freshness json.RawMessage `json:"freshness"`
	}
	_ = json.Unmarshal(raw, &c)
	return c.Now == nil && len(c.Freshness) > 0 && string(c.Freshness) != "null"
}

func checkCase(t *testing.T, via string, c conformanceCase, out []byte, code int) {
	t.Helper()
	if code != c.Expect.Exit {
		t.Fatalf("%s: exit %d, want %d; output:\n%s", via, code, c.Expect.Exit, out)
	}
	if c.Expect.Exit != 0 {
		var ref struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
				Path    string `json:"path"`
			} `json:"error"`
		}
		if err := json.Unmarshal(out, &ref); err != nil {
			t.Fatalf("%s: refusal is not JSON: %v\n%s", via, err, out)
		}
		if ref.Error.Code != c.Expect.ErrorCode {
			t.Errorf("%s: error code %q, want %q", via, ref.Error.Code, c.Expect.ErrorCode)
		}
		if ref.Error.Message == "" {
			t.Errorf("%s: refusal has no message", via)
		}
		return
	}
	var got harness.Output
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: output is not JSON: %v\n%s", via, err, out)
	}
	if string(got.Outcome) != c.Expect.Outcome {
		t.Errorf("%s: outcome %s, want %s", via, got.Outcome, c.Expect.Outcome)
	}
	if len(got.Effects) != len(c.Expect.Effects) {
		t.Fatalf("%s: %d effects, want %d", via, len(got.Effects), len(c.Expect.Effects))
	}
	for i, w := range c.Expect.Effects {
		g := got.Effects[i]
		codes := make([]string, len(g.Reasons))
		for j, r := range g.Reasons {
			codes[j] = r.Code
			if r.Message == "" {
				t.Errorf("%s: effect %d reason %s has no message", via, i, r.Code)
			}
		}
		gotSummary := []any{string(g.Verdict), string(g.Result), codes, g.ObservedCount, g.ContractHash}
		wantSummary := []any{w.Verdict, w.Result, w.Codes, w.ObservedCount, w.ContractHash}
		if diff := cmp.Diff(wantSummary, gotSummary); diff != "" {
			t.Errorf("%s: effect %d [verdict result codes observed_count hash] (-want +got):\n%s", via, i, diff)
		}
	}
}
