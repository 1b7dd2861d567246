package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/bolt"
)

const storeUsage = `usage: verifierd store check   --data-dir DIR            read-only check of the file and of every stored value: exit 0 sound, 1 damaged, 2 not checked
       verifierd store check   --store postgres://… [--store-password-env NAME]   the same for a PostgreSQL store
       verifierd store compact --data-dir DIR            rewrite the store compactly (the daemon must be stopped)
       verifierd store salvage --data-dir DIR --out DIR  copy what is readable and sound into a fresh store in --out
       verifierd store salvage --store postgres://… --out postgres://…   copy the sound sessions into another, empty database
  check and salvage read the evidence key as the daemon does: --evidence-key FILE or --evidence-key-env NAME, else <data-dir>/keys/evidence-hmac.key`

// storeMain runs `verifierd store …` and returns the exit code.
func storeMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "check" && args[0] != "compact" && args[0] != "salvage") {
		fmt.Fprintln(stderr, storeUsage)
		return 2
	}
	cmd := args[0]
	fs := flag.NewFlagSet("verifierd store "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "verifierd-data", "the daemon's data dir")
	out := fs.String("out", "", "salvage: an empty dir for the fresh store (a PostgreSQL DSN for a PostgreSQL --store)")
	storeDSN := fs.String("store", "", "a PostgreSQL store's DSN postgres://USER@HOST:PORT/DB (default: the embedded store in --data-dir)")
	passwordEnv := fs.String("store-password-env", "", "environment variable holding the PostgreSQL password")
	evidenceFile := fs.String("evidence-key", "", "the evidence key file the daemon runs with (default: <data-dir>/keys/evidence-hmac.key)")
	evidenceEnv := fs.String("evidence-key-env", "", "environment variable holding the evidence key in base64")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	var evidenceKey []byte
	fail := func(err error) int {
		if errors.Is(err, store.ErrEvidenceKey) {
			err = fmt.Errorf("%w; %s", err, evidenceKeyHint)
		}
		if errors.Is(err, bolt.ErrLocked) {
			err = fmt.Errorf("%w; stop that verifierd first", err)
		}
		fmt.Fprintln(stderr, "verifierd:", err)
		return 1
	}
	if cmd != "compact" && (*storeDSN != "" || *evidenceFile != "" || *evidenceEnv != "" || fileExists(session.EvidenceKeyPath(*dataDir))) {
		key, err := checkKey(*evidenceEnv, *evidenceFile, *dataDir)
		if err != nil {
			fmt.Fprintln(stderr, "verifierd:", err)
			return 2
		}
		evidenceKey = key
	}
	if *storeDSN != "" {
		if cmd == "compact" {
			fmt.Fprintln(stderr, "verifierd store compact: PostgreSQL compacts its own tables (VACUUM); --store is for check and salvage")
			return 2
		}
		return storePostgres(cmd, *storeDSN, *passwordEnv, *out, evidenceKey, stdout, stderr)
	}
	switch cmd {
	case "check":
		return boltCheck(*dataDir, evidenceKey, stdout, stderr, fail)
	case "compact":
		res, err := bolt.Compact(*dataDir)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "compacted %s: %d sessions kept, %d bytes -> %d bytes\n", filepath.Join(*dataDir, "verifierd.db"), res.Sessions, res.BytesBefore, res.After)
		return 0
	default: // salvage
		return boltSalvage(*dataDir, *out, evidenceKey, stdout, stderr, fail)
	}
}

// boltCheck is `verifierd store check` of the embedded store in dataDir.
func boltCheck(dataDir string, evidenceKey []byte, stdout, stderr io.Writer, fail func(error) int) int {
	rep, err := bolt.Check(dataDir)
	if err != nil {
		fmt.Fprintln(stderr, "verifierd:", err)
		return 2
	}
	if rep.Err() != nil {
		// The first line is the message the daemon stops with.
		for i, p := range rep.Problems {
			if i == 0 {
				fmt.Fprintln(stderr, "verifierd:", p)
			} else {
				fmt.Fprintf(stderr, "verifierd: also page %d: %s\n", p.Page, p.Problem)
			}
		}
		return 1
	}
	vr, err := bolt.CheckValues(dataDir, evidenceKey)
	if err != nil {
		return fail(err)
	}
	if code := reportValues(rep.Path, vr, stdout, stderr); code != 0 {
		return code
	}
	fmt.Fprintf(stdout, "the store %s is sound: %d pages of %d bytes, transaction %d, %d values checked\n", rep.Path, rep.HighWater, rep.PageSize, rep.TxID, vr.Values)
	for _, n := range rep.Notes {
		fmt.Fprintln(stdout, "note:", n)
	}
	return 0
}

// boltSalvage is `verifierd store salvage` of the embedded store in
// dataDir into out.
func boltSalvage(dataDir, out string, evidenceKey []byte, stdout, stderr io.Writer, fail func(error) int) int {
	if out == "" {
		fmt.Fprintln(stderr, "verifierd store salvage: --out DIR is required")
		return 2
	}
	rep, err := bolt.SalvageWith(dataDir, out, evidenceKey)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "salvaged into %s: %d sessions, %d results, %d baselines, %d ledger entries\n", filepath.Join(out, "verifierd.db"), rep.Sessions, rep.Results, rep.Baselines, rep.LedgerEntries)
	if rep.LedgerIncomplete {
		fmt.Fprintln(stdout, "lost: part of the ledger; `verifyctl ledger verify` on an export names where the chain breaks")
	}
	for _, id := range rep.LostSessions {
		fmt.Fprintf(stdout, "lost: session %s (its record is unreadable)\n", id)
	}
	for _, id := range rep.LostResults {
		fmt.Fprintf(stdout, "maybe lost: the result of session %s (part of the results is unreadable; it counts as unfinished)\n", id)
	}
	for _, c := range rep.LostBaselines {
		fmt.Fprintf(stdout, "lost: baseline %s (a Verify of that session answers INDETERMINATE for it)\n", c)
	}
	reportSkipped(rep.Skipped, rep.Damaged, stdout)
	for _, d := range rep.Damage {
		fmt.Fprintf(stdout, "damage: page %d: %s\n", d.Page, d.Problem)
	}
	if len(rep.Damage) > 0 {
		fmt.Fprintln(stdout, "records on damaged pages that nothing else names are lost without a trace; keep the old store until you are satisfied")
	}
	return 0
}

// checkKey reads the evidence key for check and salvage as the daemon
// does, without ever creating one.
func checkKey(env, file, dataDir string) ([]byte, error) {
	if env == "" && file == "" {
		path := session.EvidenceKeyPath(dataDir)
		if !fileExists(path) {
			return nil, nil
		}
		file = path
	}
	return loadEvidence(env, file, dataDir)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// evidenceKeyHint says how to pass the evidence key a check or a salvage
// needs (the store names no flags).
const evidenceKeyHint = "pass the store's evidence key with --evidence-key or --evidence-key-env (default <data-dir>/keys/evidence-hmac.key)"

// reportValues prints what a check of the stored values found and returns
// the exit code: 0 sound (or not sealed yet), 1 damaged, 2 not checked.
func reportValues(where string, vr *store.ValueReport, stdout, stderr io.Writer) int {
	if vr.Keys != (store.Keys{}) {
		fmt.Fprintf(stdout, "keys: evidence key %s, signing key %s (those of the store's first writer)\n", vr.Keys.EvidenceKeyID, vr.Keys.SigningKeyID)
	}
	if vr.Problem != "" {
		fmt.Fprintf(stderr, "verifierd: the values of the store %s were not checked: %s; %s\n", where, vr.Problem, evidenceKeyHint)
		return 2
	}
	if !vr.Sealed {
		fmt.Fprintf(stdout, "note: the store's %d values carry no integrity tags yet (written before verifierd checked values); the next daemon start seals them as they stand\n", vr.Unsealed)
	}
	ledgerBad := reportLedger(where, &vr.Ledger, stdout, stderr)
	if len(vr.Damaged) == 0 {
		if ledgerBad {
			return 1
		}
		return 0
	}
	for _, d := range vr.Damaged {
		if d.Session != "" {
			fmt.Fprintf(stdout, "damaged: session %s: its stored %s fails its integrity check\n", d.Session, d.What)
		} else {
			fmt.Fprintf(stdout, "damaged: the stored %s fails its integrity check\n", d.What)
		}
	}
	ids := vr.DamagedSessions()
	fmt.Fprintf(stderr, "verifierd: the store %s is damaged: %d of its %d values fail their integrity check, in %d sessions (%s); the daemon answers DataLoss for them. "+
		"Restore the store from a backup, or copy the sound sessions into a fresh store with `verifierd store salvage`\n",
		where, len(vr.Damaged), vr.Values, len(ids), strings.Join(ids, ", "))
	return 1
}

// reportLedger prints what the check of the stored ledger found and
// reports whether it is damaged.
func reportLedger(where string, r *store.LedgerReport, stdout, stderr io.Writer) bool {
	fmt.Fprintf(stdout, "ledger: %d entries chained, %d signed checkpoints verified", r.Entries, r.Checkpoints)
	if n := r.Unvouched(); n > 0 {
		fmt.Fprintf(stdout, "; the %d entries after seq %d are not yet covered by a checkpoint (the daemon signs one on a timer and at shutdown)", n, r.Signed)
	}
	fmt.Fprintln(stdout)
	if len(r.Problems) == 0 {
		return false
	}
	for _, p := range r.Problems {
		fmt.Fprintln(stdout, "damaged: ledger:", p)
	}
	fmt.Fprintf(stderr, "verifierd: the ledger in the store %s is damaged: %s; `verifyctl ledger verify` on an export names the same break, and the receipts issued before it still verify on their own\n", where, r.Problems[0])
	return true
}

// reportSkipped says which sessions and records salvage left out.
func reportSkipped(skipped []string, damaged []store.Damage, stdout io.Writer) {
	for _, id := range skipped {
		var what []string
		for _, d := range damaged {
			if d.Session == id {
				what = append(what, d.What)
			}
		}
		fmt.Fprintf(stdout, "skipped: session %s (its stored %s fails its integrity check)\n", id, strings.Join(what, ", "))
	}
	for _, d := range damaged {
		if d.Session == "" {
			fmt.Fprintf(stdout, "skipped: the %s (it fails its integrity check)\n", d.What)
		}
	}
}
