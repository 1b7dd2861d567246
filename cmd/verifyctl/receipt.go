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

// runReceiptType is the payload type of a signed run receipt.
const runReceiptType = receipt.PayloadTypeRun

// checkRunSubject checks a run receipt's signed payload: that it is one
// (its type, a run_id and an outcome) and, with want, that it is about
// that run.
func checkRunSubject(payloadType string, payload []byte, want string) error {
	if payloadType != runReceiptType {
		return &receipt.SubjectError{Field: "run", Path: "payloadType", Want: runReceiptType, Got: payloadType}
	}
	var p struct {
		RunID   string `json:"run_id"`
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal(payload, &p); err != nil || p.RunID == "" || p.Outcome == "" {
		return errors.New("the signed payload is not a run receipt: it needs run_id and outcome")
	}
	if want != "" && p.RunID != want {
		return &receipt.SubjectError{Field: "run", Path: "run_id", Want: want, Got: p.RunID}
	}
	return nil
}

// cmdReceipt: `receipt verify` checks a signed receipt offline.
func cmdReceipt(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(stderr, "usage: verifyctl receipt verify --receipt FILE (--public-key FILE | --key-id sha256:HEX) [--expect-session ID] [--expect-deployment NAME] [--expect-step STEP] [--expect-run ID] [--accept-refusal]")
		return exitInvalid
	}
	fs := flag.NewFlagSet("receipt verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("receipt", "", "the receipt: a DSSE envelope (JSON), as `verifyctl verify --receipt-out` or `verifyctl run finish --receipt-out` writes it")
	keyFile := fs.String("public-key", "", "the daemon's public key: the JSON `verifyctl key` prints, or the base64 of the raw 32 bytes")
	keyID := fs.String("key-id", "", "the daemon's key id (sha256:HEX); the public key is then taken from the receipt's payload and must hash to it")
	var want receipt.Expect
	fs.StringVar(&want.Session, "expect-session", "", "also require the signed payload's session_id to be this session")
	fs.StringVar(&want.Deployment, "expect-deployment", "", "also require the signed payload's deployment.name to be this registered deployment")
	fs.StringVar(&want.Step, "expect-step", "", "also require the signed payload's workflow.step to be this workflow step")
	fs.BoolVar(&want.AcceptRefusal, "accept-refusal", false, "with --expect-*: accept the receipt of a refused Begin (kind begin_refused) as matching; without it such a receipt fails every expectation, since nothing was verified")
	expectRun := fs.String("expect-run", "", "also require a run receipt (payload type "+runReceiptType+") whose signed run_id is this run")
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
		var code int
		if pub, code = readKeyFile(stdout, *keyFile); pub == nil {
			return code
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
	// The subject is read from the payload the signature covers, never
	// from anything around the envelope.
	err = receipt.CheckSubject(payload, want)
	if err == nil && (*expectRun != "" || env.PayloadType == runReceiptType) {
		err = checkRunSubject(env.PayloadType, payload, *expectRun)
	}
	if err != nil {
		out := map[string]any{"valid": false, "signature_valid": true, "reason": err.Error()}
		if se, ok := errors.AsType[*receipt.SubjectError](err); ok {
			out["mismatch"] = map[string]any{"field": se.Field, "path": se.Path, "expected": se.Want, "found": se.Got}
		}
		writeJSON(stdout, out)
		return exitFailure
	}
	writeJSON(stdout, map[string]any{"valid": true, "key_id": receipt.KeyID(pub), "payload_type": env.PayloadType, "payload": decoded})
	return exitOK
}

// readKeyFile reads what `verifyctl key` prints (or the bare base64 key).
func readKeyFile(stdout io.Writer, path string) (ed25519.PublicKey, int) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, offlineError(stdout, "public-key", err.Error())
	}
	pub, err := parseKeyFile(data)
	if err != nil {
		return nil, offlineError(stdout, "public-key", err.Error())
	}
	return pub, exitOK
}

// cmdLedger: `ledger verify` checks an exported ledger offline.
func cmdLedger(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "export" {
		return cmdLedgerExport(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(stderr, "usage: verifyctl ledger verify --file ledger.jsonl [--public-key FILE | --key-id ID] [--receipt FILE] | ledger export --addr HOST:PORT > ledger.jsonl")
		return exitInvalid
	}
	fs := flag.NewFlagSet("ledger verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("file", "", "the ledger export, JSON lines")
	rcpt := fs.String("receipt", "", "also check that this receipt's entry is in the chain")
	keyFile := fs.String("public-key", "", "the daemon's public key (the JSON `verifyctl key` prints): also check that the export ends exactly at a checkpoint it signed")
	keyID := fs.String("key-id", "", "the daemon's key id (sha256:HEX), instead of --public-key: the key is taken from the checkpoint and must hash to it")
	if err := fs.Parse(args[1:]); err != nil {
		return exitInvalid
	}
	if *file == "" {
		return offlineError(stdout, "file", "give --file ledger.jsonl (from `verifyctl ledger export`)")
	}
	if *keyFile != "" && *keyID != "" {
		return offlineError(stdout, "key-id", "give one of --public-key FILE or --key-id ID")
	}
	var pub ed25519.PublicKey
	if *keyFile != "" {
		var code int
		if pub, code = readKeyFile(stdout, *keyFile); pub == nil {
			return code
		}
	}
	f, err := os.Open(*file)
	if err != nil {
		return offlineError(stdout, "file", err.Error())
	}
	defer f.Close()
	x, err := receipt.ReadExport(f)
	if err != nil {
		return writeInvalid(stdout, err)
	}
	entries := x.Entries
	signed := *keyFile != "" || *keyID != ""
	head, err := receipt.VerifyChain(entries, false)
	if err != nil {
		// Inside the chain, every break is a rewrite of what was there.
		out := map[string]any{"valid": false, "valid_chain": false, "signed_head_verified": false, "tampering": receipt.Rewritten, "reason": err.Error()}
		if ce, ok := errors.AsType[*receipt.ChainError](err); ok {
			out["seq"], out["line"] = ce.Seq, ce.Line
		}
		writeJSON(stdout, out)
		return exitFailure
	}
	out := map[string]any{"valid": true, "valid_chain": true, "signed_head_verified": false, "entries": len(entries), "head": head}
	if !signed {
		out["note"] = "only the chain's internal consistency was checked: an export cut short, extended with chained entries or re-chained after an edit passes this check; give --public-key (or --key-id) to check it against the daemon's signed checkpoint"
	} else {
		if *keyID != "" && len(x.Checkpoints) > 0 {
			if pub, err = receipt.CheckpointSignerKey(x.Checkpoints[len(x.Checkpoints)-1], *keyID); err != nil {
				return writeLedgerError(stdout, &receipt.LedgerError{Kind: receipt.Truncated, Seq: lastSeq(entries) + 1, Reason: err.Error()})
			}
		}
		var cp *receipt.Checkpoint
		if pub == nil { // --key-id, and no checkpoint to take the key from
			err = &receipt.LedgerError{Kind: receipt.Truncated, Seq: lastSeq(entries) + 1,
				Reason: "the export holds no signed checkpoint, so nothing vouches for where it ends (entries may have been dropped)"}
		} else {
			cp, err = receipt.VerifySigned(x, pub)
		}
		if err != nil {
			return writeLedgerError(stdout, err)
		}
		out["signed_head_verified"], out["key_id"] = true, receipt.KeyID(pub)
		out["checkpoint"] = map[string]any{"seq": cp.Seq, "head": cp.Head, "at": cp.At}
	}
	if *rcpt != "" {
		env, code := readEnvelope(stdout, *rcpt)
		if env == nil {
			return code
		}
		// The chain check needs the payload only; its signature is
		// `receipt verify`'s job.
		e, err := receipt.FindReceipt(entries, env.Payload)
		if err != nil {
			// A receipt issued after the export's end: the export was cut
			// (back to an older checkpoint, when it is signed).
			var p struct {
				Ledger receipt.Position `json:"ledger"`
			}
			if json.Unmarshal(env.Payload, &p) == nil && p.Ledger.Seq > lastSeq(entries) {
				return writeLedgerError(stdout, &receipt.LedgerError{Kind: receipt.Truncated, Seq: lastSeq(entries) + 1,
					Reason: fmt.Sprintf("the receipt was recorded at seq %d, the export ends at seq %d: entries %d to %d are missing", p.Ledger.Seq, lastSeq(entries), lastSeq(entries)+1, p.Ledger.Seq)})
			}
			return writeInvalid(stdout, err)
		}
		out["receipt_seq"] = e.Seq
	}
	writeJSON(stdout, out)
	return exitOK
}

func lastSeq(entries []receipt.Entry) uint64 {
	if len(entries) == 0 {
		return 0
	}
	return entries[len(entries)-1].Seq
}

// writeLedgerError prints an export that does not end at the daemon's
// signed checkpoint (its chain holds) and exits 1.
func writeLedgerError(stdout io.Writer, err error) int {
	out := map[string]any{"valid": false, "valid_chain": true, "signed_head_verified": false, "reason": err.Error()}
	if le, ok := errors.AsType[*receipt.LedgerError](err); ok {
		out["tampering"], out["seq"] = le.Kind, le.Seq
		if le.Checkpoint != nil {
			out["checkpoint"] = map[string]any{"seq": le.Checkpoint.Seq, "head": le.Checkpoint.Head, "at": le.Checkpoint.At}
		}
	}
	writeJSON(stdout, out)
	return exitFailure
}

func readEnvelope(stdout io.Writer, path string) (*receipt.Envelope, int) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, offlineError(stdout, "receipt", err.Error())
	}
	// A key written twice (in any case) is a forgery other readers would
	// read the other way: invalid, exit 1.
	if err := receipt.CheckKeys(data, "the receipt file"); err != nil {
		return nil, writeInvalid(stdout, err)
	}
	// `verifyctl verify` output holds the envelope under "receipt".
	var wrapped struct {
		Receipt json.RawMessage `json:"receipt"`
	}
	if json.Unmarshal(data, &wrapped) == nil && len(wrapped.Receipt) > 0 {
		data = wrapped.Receipt
	}
	env, err := receipt.ParseEnvelope(data)
	if _, dup := errors.AsType[*receipt.DuplicateKeyError](err); dup {
		return nil, writeInvalid(stdout, err)
	}
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
