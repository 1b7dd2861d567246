package session

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"testing"

	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/internal/signing"
	"github.com/verifierd/verifierd/internal/store/bolt"
	"github.com/verifierd/verifierd/internal/workflow"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/sdk"
)

// BenchmarkBeginVerifyInProcess: one session (Begin, then Verify) of a
// 10-record read through an in-process adapter (the SDK's gRPC server over
// an in-memory connection) and the embedded store without fsync, with
// receipts signed: the daemon's own work per session, without the API's
// transport and the plugin process. Profile it with -cpuprofile.
func BenchmarkBeginVerifyInProcess(b *testing.B) {
	tab := &table{}
	for i := range 10 {
		tab.add(sdk.Record{"id": json.Number(string(rune('0' + i))), "p": "1", "note": "routine visit"})
	}
	a := &memAdapter{kind: "bench-inprocess", tier: 1, table: tab}
	host, err := pluginhost.New(pluginhost.Options{})
	if err != nil {
		b.Fatal(err)
	}
	host.RegisterInProcess(a.kind, func() sdk.Adapter { return a })
	st, err := bolt.OpenWith(b.TempDir(), bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { host.Close(); st.Close() })
	_, priv, _ := ed25519.GenerateKey(nil)
	no := false
	m := mustNew(b, Options{Host: host, Store: st, Daemon: &config.Daemon{Policy: callerContracts(&workflow.Policy{RequireChangeClaim: &no})}, AllowInline: true, Signer: signing.New(priv)})
	dep := []byte("effects: {kind: bench-inprocess}\n")
	effects := []byte(`[{"kind": "record_written", "match": {"p": "1"}, "expected_count": 10, "timeout_s": 1}]`)
	ctx := context.Background()
	for b.Loop() {
		res, err := m.Begin(ctx, BeginRequest{Deployment: dep, Effects: effects, Params: map[string]string{"p": "1"}})
		if err != nil {
			b.Fatal(err)
		}
		v, err := m.Verify(ctx, res.SessionID)
		if err != nil {
			b.Fatal(err)
		}
		if v.Outcome != judge.Verified {
			b.Fatalf("outcome %s", v.Outcome)
		}
	}
}
