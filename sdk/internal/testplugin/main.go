package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/plugin"
	"github.com/verifierd/verifierd/sdk/refusal"
)

func main() {
	err := plugin.Serve(func() sdk.Adapter {
		if os.Getenv("TESTPLUGIN_PRINT") != "" {
			// No newline: the stdout guard must keep even a partial line
			// off the handshake.
			fmt.Print("stray-before-handshake")
		}
		return &adapter{}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type config struct {
	Mode string `json:"mode"`
	Path string `json:"path"`
	// PanicIn names a unary call that panics ("test_connection").
	PanicIn string `json:"panic_in"`
}

type adapter struct {
	cfg      config
	password string
}

func (a *adapter) Info() sdk.Info {
	return sdk.Info{Kind: "testplugin", Tier: sdk.TierIndependentSystem, NeedsBaseline: true, Description: "SDK test adapter"}
}

func (a *adapter) Configure(ctx context.Context, req sdk.ConfigureRequest) error {
	if err := req.DecodeConfig(&a.cfg); err != nil {
		return err
	}
	switch a.cfg.Mode {
	case "synthetic":
	case "file":
		if a.cfg.Path == "" {
			return &refusal.Error{Path: "path", Message: "required for mode file"}
		}
	default:
		return &refusal.Error{Path: "mode", Message: fmt.Sprintf("%q is not a mode; write synthetic or file", a.cfg.Mode)}
	}
	// The slot the deployment declares as secret_env: {password: VAR}.
	a.password, _ = req.Secret("password")
	sdk.Logger(ctx).Info("configured", "mode", a.cfg.Mode)
	return nil
}

func (a *adapter) TestConnection(ctx context.Context, _ sdk.TestRequest) (sdk.TestResult, error) {
	if a.cfg.PanicIn == "test_connection" {
		panic("boom in test connection")
	}
	if a.cfg.Mode == "synthetic" {
		return sdk.TestResult{Reachable: true, Message: "synthetic", Latency: time.Millisecond}, nil
	}
	if why := a.unreachable(); why != "" {
		return sdk.TestResult{Message: why}, nil
	}
	return sdk.TestResult{Reachable: true, Message: "file readable"}, nil
}

func (a *adapter) CaptureBefore(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return a.capture(ctx, req)
}

func (a *adapter) CaptureAfter(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	return a.capture(ctx, req)
}

func (a *adapter) Verdict(ctx context.Context, req sdk.VerdictRequest) (sdk.Demotion, error) {
	if req.Verdict == sdk.VerdictConfirmed && req.Tier > 1 {
		return sdk.Demotion{Verdict: sdk.VerdictIndeterminate, ReasonCode: "TEST_DEMOTION", Message: "tier too weak"}, nil
	}
	return sdk.Demotion{}, nil
}

func (a *adapter) capture(ctx context.Context, req sdk.CaptureRequest) (sdk.Capture, error) {
	if a.cfg.Mode == "synthetic" {
		return a.synthetic(req)
	}
	if why := a.unreachable(); why != "" {
		return sdk.Unreachable("%s", why), nil
	}
	return sdk.Capture{Reachable: true, At: time.Now(), Records: a.fileRecords(req.Selector)}, nil
}

func (a *adapter) unreachable() string {
	if _, err := os.Stat(a.cfg.Path + ".down"); err == nil {
		return "system of record is down"
	}
	want, err := os.ReadFile(a.cfg.Path + ".password")
	if err != nil {
		return "cannot read the password file: " + err.Error()
	}
	if strings.TrimSpace(string(want)) != a.password {
		return "authentication failed"
	}
	return ""
}

// fileRecords streams the file line by line, keeping the selector's matches.
func (a *adapter) fileRecords(selector map[string]string) sdk.RecordSource {
	return func(yield func(sdk.Record, error) bool) {
		f, err := os.Open(a.cfg.Path)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err != nil {
			yield(nil, err)
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "" {
				continue
			}
			dec := json.NewDecoder(strings.NewReader(sc.Text()))
			dec.UseNumber()
			var r sdk.Record
			if err := dec.Decode(&r); err != nil {
				yield(nil, err)
				return
			}
			if matches(r, selector) && !yield(r, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(nil, err)
		}
	}
}

func matches(r sdk.Record, selector map[string]string) bool {
	for k, want := range selector {
		if fmt.Sprint(r[k]) != want {
			return false
		}
	}
	return true
}

func (a *adapter) synthetic(req sdk.CaptureRequest) (sdk.Capture, error) {
	mode := req.Selector["mode"]
	count, _ := strconv.Atoi(req.Selector["count"])
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	switch mode {
	case "many":
		return sdk.Capture{Reachable: true, At: at, Records: func(yield func(sdk.Record, error) bool) {
			for i := range count {
				r := sdk.Record{"id": int64(i), "exact": json.Number("12345678901234567890.5"), "name": "row " + strconv.Itoa(i)}
				if !yield(r, nil) {
					return
				}
			}
		}}, nil
	case "endless":
		return sdk.Capture{Reachable: true, At: at, Records: func(yield func(sdk.Record, error) bool) {
			for i := 0; ; i++ {
				if !yield(sdk.Record{"id": int64(i)}, nil) {
					return
				}
			}
		}}, nil
	case "panic":
		return sdk.Capture{Reachable: true, At: at, Records: func(yield func(sdk.Record, error) bool) {
			for i := range 2500 {
				if !yield(sdk.Record{"id": int64(i)}, nil) {
					return
				}
			}
			panic("boom in the record stream")
		}}, nil
	case "print":
		fmt.Println("stray-fmt-after")
		_, _ = syscall.Write(1, []byte("stray-fd1-after\n"))
		return sdk.Capture{Reachable: true, At: at, Records: sdk.Records(sdk.Record{"id": "1"})}, nil
	case "env":
		// One record per environment variable name, so a test can see
		// exactly what the plugin inherited.
		var recs []sdk.Record
		for _, kv := range os.Environ() {
			name, _, _ := strings.Cut(kv, "=")
			recs = append(recs, sdk.Record{"name": name})
		}
		return sdk.Capture{Reachable: true, At: at, Records: sdk.Records(recs...)}, nil
	case "unreachable":
		return sdk.Unreachable("synthetic outage"), nil
	case "truncated":
		return sdk.Incomplete(sdk.CodeReadMayBeTruncated, "100 records, max_records 100"), nil
	case "error":
		return sdk.Capture{}, errors.New("adapter bug")
	case "stream-error":
		return sdk.Capture{Reachable: true, Records: func(yield func(sdk.Record, error) bool) {
			if yield(sdk.Record{"id": "1"}, nil) {
				yield(nil, errors.New("cursor lost"))
			}
		}}, nil
	case "panic-now":
		panic("boom in capture")
	}
	return sdk.Capture{}, fmt.Errorf("unknown synthetic mode %q", mode)
}
