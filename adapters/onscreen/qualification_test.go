package onscreen

import (
	"net"
	"testing"
	"time"

	"github.com/verifierd/verifierd/internal/testservers/screenapp"
	"github.com/verifierd/verifierd/sdk"
	"github.com/verifierd/verifierd/sdk/adaptertest"
)

// closedCDPURL is a loopback DevTools address nobody answers on.
func closedCDPURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// harness qualifies the tier-3 read-back against the screen application:
// the selector names the record's holder; the record page of the run's
// reference is what the read-back re-opens. A screen shows one record, so
// the kit runs with OneRecord.
func harness(t *testing.T) adaptertest.Harness {
	a := startApp(t)
	rec := typed("q1")
	id := "/records/" + rec.Ref
	put := func(r screenapp.Record) string { a.Put(r); return id }
	config := func(url string) sdk.ConfigureRequest {
		sec := a.reopenSection()
		inner(sec)["screen"] = map[string]any{"cdp_url": url, "page_url_prefix": a.URL + "/"}
		return request(t, sec, params(rec)).ConfigureRequest
	}
	other := rec
	other.Name = "Zebulon Quartermaine"
	stale := rec
	stale.Born = "1901-02-03"
	return adaptertest.Harness{
		Params:           params(rec),
		Config:           func(*testing.T) sdk.ConfigureRequest { return config(cdpURL) },
		BadCredentials:   func(t *testing.T) sdk.ConfigureRequest { return config(closedCDPURL(t)) },
		Selector:         map[string]string{"name": rec.Name},
		IdentityField:    "id",
		Reset:            func(*testing.T) { a.Delete(rec.Ref) },
		WriteCorrect:     func(*testing.T) string { return put(rec) },
		WriteWrongEntity: func(*testing.T) string { return put(other) },
		WriteDuplicate:   func(*testing.T) string { return put(rec) },
		WriteStale: func(*testing.T) (string, string) {
			put(stale)
			return "born", stale.Born
		},
		WriteLater: func(_ *testing.T, delay time.Duration) {
			go func() {
				time.Sleep(delay)
				a.Put(rec)
			}()
		},
		SetReachable: func(_ *testing.T, up bool) { a.SetDown(!up) },
		OneRecord:    true,
	}
}

// TestQualification runs the SDK's qualification kit in process.
func TestQualification(t *testing.T) {
	h := harness(t)
	h.Factory = New
	adaptertest.Run(t, h)
}

// TestQualificationSubprocess runs the kit against the real plugin binary,
// as the daemon starts it: its own process and an empty environment.
func TestQualificationSubprocess(t *testing.T) {
	h := harness(t)
	h.Binary = pluginBinary
	h.Env = []string{}
	adaptertest.Run(t, h)
}
