// Command client is release-test's customer program: it is copied out of
// the repository and built against the released module from dist/goproxy
// (no replace). Against the released daemon running the demo's clinic
// deployment it checks /health and the verifierd_build_info metric name
// the release, runs Begin, the save (the clinic program), Verify, and
// checks the signed receipt offline with the key given in a file.
//
//	client -addr HOST:PORT -http HOST:PORT -key FILE -version vX.Y.Z -- SAVE_COMMAND...
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/verifierd/verifierd/client"
	"github.com/verifierd/verifierd/receipt"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7443", "the daemon's gRPC address")
	httpAddr := flag.String("http", "127.0.0.1:7444", "the daemon's HTTP address")
	keyFile := flag.String("key", "", "file holding the receipt public key (base64, as verifyctl key prints it)")
	version := flag.String("version", "", "the release the daemon must report")
	flag.Parse()
	if err := run(*addr, *httpAddr, *keyFile, *version, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "release-test client:", err)
		os.Exit(1)
	}
	fmt.Println("release-test client: VERIFIED, receipt checked offline, daemon reports", *version)
}

func run(addr, httpAddr, keyFile, version string, save []string) error {
	if len(save) == 0 {
		return errors.New("give the save command after --")
	}
	if err := checkVersion(httpAddr, version); err != nil {
		return err
	}
	text, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	pub, err := receipt.ParsePublicKey(strings.TrimSpace(string(text)))
	if err != nil {
		return err
	}
	c, err := client.Dial(addr, client.WithReceiptKey(pub))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := client.Request{Deployment: "clinic", Workflow: "triage", Step: "save_triage",
		Params: map[string]string{"patient_id": "p1", "note": "Follow-up"}}
	s, err := c.Begin(ctx, req)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if out, err := exec.CommandContext(ctx, save[0], save[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("the save %v: %w: %s", save, err, out)
	}
	res, err := c.Verify(ctx, s)
	if err != nil {
		return fmt.Errorf("verify (the receipt is checked with the pinned key): %w", err)
	}
	if res.Outcome != client.Verified {
		return fmt.Errorf("outcome %s, want VERIFIED", res.Outcome)
	}
	if _, err := res.CheckReceipt(pub, s.Expect()); err != nil {
		return fmt.Errorf("receipt: %w", err)
	}
	return nil
}

// checkVersion reads /health and /metrics and wants version in both.
func checkVersion(httpAddr, version string) error {
	body, err := get("http://" + httpAddr + "/health")
	if err != nil {
		return err
	}
	var health struct{ Status, Version string }
	if err := json.Unmarshal(body, &health); err != nil || health.Status != "ok" || health.Version != version {
		return fmt.Errorf("/health answered %s (%v); want status ok, version %s", body, err, version)
	}
	metrics, err := get("http://" + httpAddr + "/metrics")
	if err != nil {
		return err
	}
	want := `version="` + version + `"`
	for line := range strings.Lines(string(metrics)) {
		if strings.HasPrefix(line, "verifierd_build_info{") && strings.Contains(line, want) && strings.HasSuffix(strings.TrimSpace(line), " 1") {
			return nil
		}
	}
	return fmt.Errorf("/metrics has no verifierd_build_info{...%s...} 1", want)
}

func get(url string) ([]byte, error) {
	res, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %s", url, res.Status, body)
	}
	return body, err
}
