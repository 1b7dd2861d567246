package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// receiptDomain is the ErrorInfo domain of a refused Begin's terminal
// outcome and receipt (internal/server.ReceiptDomain).
const receiptDomain = "verifierd.receipt"

// receiptJSON shows a receipt envelope as JSON (null when there is none).
func receiptJSON(env *structpb.Struct) any {
	raw := verifierv1.EnvelopeJSON(env)
	if len(raw) == 0 {
		return nil
	}
	return json.RawMessage(raw)
}

// saveReceipt writes the envelope alone, for `receipt verify --receipt`.
func saveReceipt(path string, env *structpb.Struct) error {
	if path == "" {
		return nil
	}
	raw := verifierv1.EnvelopeJSON(env)
	if len(raw) == 0 {
		return errors.New("--receipt-out: the daemon returned no receipt")
	}
	return os.WriteFile(path, append(append([]byte(nil), raw...), '\n'), 0o644)
}

func reverificationJSON(r *verifierv1.Reverification) map[string]any {
	return map[string]any{
		"attempt": r.GetAttempt(), "reason": r.GetReason(),
		"verified_at": r.GetVerifiedAt().AsTime().Format(time.RFC3339Nano),
		"result":      resultJSON(r.GetResult()), "receipt": receiptJSON(r.GetReceipt()),
	}
}

// cmdKey prints the daemon's signing identity.
func cmdKey(args []string, stdout, stderr io.Writer) int {
	return clientCommand("key", args, stdout, stderr, func(*flag.FlagSet) func() error {
		return func() error { return nil }
	}, func(ctx context.Context, c verifierv1.VerifierServiceClient) (any, error) {
		res, err := c.GetInfo(ctx, &verifierv1.GetInfoRequest{})
		if err != nil {
			return nil, err
		}
		return map[string]any{"public_key": res.GetPublicKey(), "key_id": res.GetKeyId(), "ledger_seq": res.GetLedgerSeq(), "ledger_head": res.GetLedgerHead()}, nil
	})
}

// cmdLedgerExport writes the daemon's ledger as JSON lines: each line the
// entry's canonical JSON, exactly the bytes the next entry's prev hashes,
// and last the signed checkpoint (a DSSE envelope) of the last entry.
func cmdLedgerExport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ledger export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	from := fs.Uint64("from-seq", 0, "first seq to export (default: the whole ledger)")
	if err := fs.Parse(args); err != nil {
		return exitInvalid
	}
	conn, ctx, cancel, err := cf.dial()
	if err != nil {
		return usageError(stderr, "%v", err)
	}
	defer conn.Close()
	defer cancel()
	stream, err := verifierv1.NewVerifierServiceClient(conn).ExportLedger(ctx, &verifierv1.ExportLedgerRequest{FromSeq: *from})
	if err != nil {
		return callError(stdout, stderr, err)
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return exitOK
		}
		if err != nil {
			return callError(stdout, stderr, err)
		}
		line := msg.GetEntry().GetCanonicalJson()
		if cp := msg.GetCheckpoint(); cp != nil {
			line = verifierv1.EnvelopeJSON(cp) // the signed checkpoint the export ends at
		}
		if _, err := stdout.Write(append(line, '\n')); err != nil {
			return exitFailure
		}
	}
}

// cmdReverify re-verifies a session after a repair.
func cmdReverify(args []string, stdout, stderr io.Writer) int {
	var id, reason, receiptOut string
	return clientCommand("reverify", args, stdout, stderr, func(fs *flag.FlagSet) func() error {
		fs.StringVar(&reason, "reason", "", "what was repaired (kept with the result)")
		fs.StringVar(&receiptOut, "receipt-out", "", "also write the new receipt alone to this file")
		check := sessionFlag(&id)(fs)
		return func() error {
			if reason == "" {
				return fmt.Errorf("needs --reason TEXT: what was repaired")
			}
			return check()
		}
	}, func(ctx context.Context, c verifierv1.VerifierServiceClient) (any, error) {
		res, err := c.Reverify(ctx, &verifierv1.ReverifyRequest{SessionId: id, Reason: reason})
		if err != nil {
			return nil, err
		}
		if err := saveReceipt(receiptOut, res.GetReverification().GetReceipt()); err != nil {
			return nil, err
		}
		out := reverificationJSON(res.GetReverification())
		out["session_id"] = res.GetSessionId()
		return out, nil
	})
}

// cmdArtifact: `artifact verify` digests a local file and asks the daemon
// whether a registered deployment holds exactly those bytes.
func cmdArtifact(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(stderr, "usage: verifyctl artifact verify --deployment-name NAME --file PATH [--name NAME] [--media-type TYPE] [--receipt-out FILE] [--run RUN --artifact NAME --step STEP]")
		return exitInvalid
	}
	var depName, file, name, mediaType, receiptOut string
	a := &verifierv1.Artifact{}
	req := &verifierv1.VerifyArtifactRequest{Artifact: a}
	return clientCommand("artifact verify", args[1:], stdout, stderr, func(fs *flag.FlagSet) func() error {
		fs.StringVar(&depName, "deployment-name", "", "a document-hash or file deployment registered in the daemon config")
		fs.StringVar(&file, "file", "", "the local file whose exact bytes must be present")
		fs.StringVar(&name, "name", "", "the file name in the store (default: the base name of --file)")
		fs.StringVar(&mediaType, "media-type", "", "the media type to record (default: from the extension)")
		fs.StringVar(&receiptOut, "receipt-out", "", "also write the receipt alone to this file")
		fs.StringVar(&req.RunId, "run", "", "record the answer in this run (with --artifact and --step): a CONFIRMED file lets its consumer begin")
		fs.StringVar(&req.RunArtifact, "artifact", "", "with --run: the artifact's name in the workflow (a step's produces:)")
		fs.StringVar(&req.Step, "step", "", "with --run: the step that produced the artifact")
		return func() error {
			if depName == "" || file == "" {
				return fmt.Errorf("needs --deployment-name NAME and --file PATH")
			}
			if (req.RunId == "") != (req.RunArtifact == "") || (req.RunId == "") != (req.Step == "") {
				return fmt.Errorf("--run, --artifact and --step go together: name the run, the artifact of the workflow and the step that produced it")
			}
			req.DeploymentName = depName
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			h := sha256.New()
			n, err := io.Copy(h, f)
			if err != nil {
				return err
			}
			if name == "" {
				name = filepath.Base(file)
			}
			if mediaType == "" {
				mediaType, _, _ = strings.Cut(mime.TypeByExtension(filepath.Ext(file)), ";")
			}
			a.Sha256, a.Size, a.Name, a.MediaType = hex.EncodeToString(h.Sum(nil)), n, name, mediaType
			return nil
		}
	}, func(ctx context.Context, c verifierv1.VerifierServiceClient) (any, error) {
		res, err := c.VerifyArtifact(ctx, req)
		if err != nil {
			return nil, err
		}
		if err := saveReceipt(receiptOut, res.GetReceipt()); err != nil {
			return nil, err
		}
		reasons := []map[string]string{}
		for _, r := range res.GetReasons() {
			reasons = append(reasons, map[string]string{"code": r.GetCode(), "message": r.GetMessage()})
		}
		return map[string]any{
			"verdict": res.GetVerdict().String(), "reasons": reasons,
			"tier": res.GetTier(), "oracle_rung": res.GetOracleRung(), "substrate": res.GetSubstrate(),
			"artifact": map[string]any{"sha256": a.Sha256, "size": a.Size, "name": a.Name, "media_type": a.MediaType},
			"receipt":  receiptJSON(res.GetReceipt()),
		}, nil
	})
}
