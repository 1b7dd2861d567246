package main

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/verifierd/verifierd/receipt"
)

// cmdReceipt: `receipt verify` checks a signed receipt offline.
func cmdReceipt(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(stderr, "usage: verifyctl receipt verify --receipt FILE (--public-key FILE | --key-id sha256:HEX)")
		return exitInvalid
	}
	fs := flag.NewFlagSet("receipt verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("receipt", "", "the receipt: a DSSE envelope (JSON), as `verifyctl verify --receipt-out` writes it")
	keyFile := fs.String("public-key", "", "the daemon's public key: the JSON `verifyctl key` prints, or the base64 of the raw 32 bytes")
	keyID := fs.String("key-id", "", "the daemon's key id (sha256:HEX); the public key is then taken from the receipt's payload and must hash to it")
	if err := fs.Parse(args[1:]); err != nil {
		return exitInvalid
	}
	if *file == "" || (*keyFile == "") == (*keyID == "") {
		return offlineError(stdout, "receipt", "give --receipt FILE and one of --public-key FILE or --key-id ID")
	}
	env, code := readEnvelope(stdout, *file)
	if env == nil {
		return code
	}
	var pub ed25519.PublicKey
	if *keyFile != "" {
		data, err := os.ReadFile(*keyFile)
		if err != nil {
			return offlineError(stdout, "public-key", err.Error())
		}
		if pub, err = parseKeyFile(data); err != nil {
			return offlineError(stdout, "public-key", err.Error())
		}
	} else {
		var err error
		if pub, err = signerKey(env.Payload, *keyID); err != nil {
			return writeInvalid(stdout, err)
		}
	}
	payload, err := env.Open(pub)
	if err != nil {
		return writeInvalid(stdout, err)
	}
	var decoded any
	if err := json.Unmarshal(payload, &decoded); err != nil {
		return writeInvalid(stdout, fmt.Errorf("the signed payload is not JSON: %v", err))
	}
	writeJSON(stdout, map[string]any{"valid": true, "key_id": receipt.KeyID(pub), "payload_type": env.PayloadType, "payload": decoded})
	return exitOK
}

// cmdLedger: `ledger verify` checks an exported ledger offline.
func cmdLedger(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "export" {
		return cmdLedgerExport(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(stderr, "usage: verifyctl ledger verify --file ledger.jsonl [--receipt FILE] | ledger export --addr HOST:PORT > ledger.jsonl")
		return exitInvalid
	}
	fs := flag.NewFlagSet("ledger verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("file", "", "the ledger export, JSON lines")
	rcpt := fs.String("receipt", "", "also check that this receipt's entry is in the chain")
	if err := fs.Parse(args[1:]); err != nil {
		return exitInvalid
	}
	if *file == "" {
		return offlineError(stdout, "file", "give --file ledger.jsonl (from `verifyctl ledger export`)")
	}
	f, err := os.Open(*file)
	if err != nil {
		return offlineError(stdout, "file", err.Error())
	}
	defer f.Close()
	entries, err := receipt.ReadEntries(f)
	if err != nil {
		return writeInvalid(stdout, err)
	}
	head, err := receipt.VerifyChain(entries, false)
	if err != nil {
		out := map[string]any{"valid": false, "reason": err.Error()}
		if ce, ok := errors.AsType[*receipt.ChainError](err); ok {
			out["seq"], out["line"] = ce.Seq, ce.Line
		}
		writeJSON(stdout, out)
		return exitFailure
	}
	out := map[string]any{"valid": true, "entries": len(entries), "head": head}
	if *rcpt != "" {
		env, code := readEnvelope(stdout, *rcpt)
		if env == nil {
			return code
		}
		// The chain check needs the payload only; its signature is
		// `receipt verify`'s job.
		e, err := receipt.FindReceipt(entries, env.Payload)
		if err != nil {
			return writeInvalid(stdout, err)
		}
		out["receipt_seq"] = e.Seq
	}
	writeJSON(stdout, out)
	return exitOK
}

func readEnvelope(stdout io.Writer, path string) (*receipt.Envelope, int) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, offlineError(stdout, "receipt", err.Error())
	}
	// `verifyctl verify` output holds the envelope under "receipt".
	var wrapped struct {
		Receipt json.RawMessage `json:"receipt"`
	}
	if json.Unmarshal(data, &wrapped) == nil && len(wrapped.Receipt) > 0 {
		data = wrapped.Receipt
	}
	env, err := receipt.ParseEnvelope(data)
	if err != nil {
		return nil, offlineError(stdout, "receipt", err.Error())
	}
	return env, exitOK
}

func parseKeyFile(data []byte) (ed25519.PublicKey, error) {
	var printed struct {
		PublicKey string `json:"public_key"`
	}
	text := strings.TrimSpace(string(data))
	if json.Unmarshal(data, &printed) == nil && printed.PublicKey != "" {
		text = printed.PublicKey
	}
	return receipt.ParsePublicKey(text)
}

// signerKey takes the public key a payload names and checks it against the
// key id the caller trusts.
func signerKey(payload []byte, keyID string) (ed25519.PublicKey, error) {
	var p struct {
		Signer struct {
			PublicKey string `json:"public_key"`
		} `json:"signer"`
	}
	if err := json.Unmarshal(payload, &p); err != nil || p.Signer.PublicKey == "" {
		return nil, errors.New("the payload names no signer public key; pass --public-key")
	}
	pub, err := receipt.ParsePublicKey(p.Signer.PublicKey)
	if err != nil {
		return nil, err
	}
	if got := receipt.KeyID(pub); got != keyID {
		return nil, fmt.Errorf("the receipt was signed by %s, not %s", got, keyID)
	}
	return pub, nil
}

func writeInvalid(stdout io.Writer, err error) int {
	writeJSON(stdout, map[string]any{"valid": false, "reason": err.Error()})
	return exitFailure
}

// offlineError prints invalid input of an offline command the way the
// client commands print theirs, and exits 2.
func offlineError(stdout io.Writer, path, message string) int {
	writeJSON(stdout, map[string]any{"error": map[string]any{"code": "INVALID_INPUT", "message": message, "path": path}})
	return exitInvalid
}
