package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/store/pg"
)

// storePostgres runs `verifierd store check|salvage --store postgres://…`:
// check reads every stored value of the database and lists the damaged
// sessions; salvage copies the sound ones into the empty database --out
// names.
func storePostgres(cmd, dsn, passwordEnv, out string, evidenceKey []byte, stdout, stderr io.Writer) int {
	if !pg.IsDSN(dsn) {
		fmt.Fprintln(stderr, "verifierd: --store must be a PostgreSQL DSN postgres://USER@HOST:PORT/DATABASE (the embedded store is named by --data-dir)")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	src, err := pg.Open(ctx, dsn, pg.Options{PasswordEnv: passwordEnv})
	if err != nil {
		fmt.Fprintln(stderr, "verifierd:", pgFlagError(err))
		return 2
	}
	defer src.Close()
	where := "postgres " + src.Where()
	if cmd == "check" {
		vr, err := src.CheckValues(ctx, evidenceKey)
		if err != nil {
			fmt.Fprintln(stderr, "verifierd:", err)
			return 2
		}
		if code := reportValues(where, vr, stdout, stderr); code != 0 {
			return code
		}
		fmt.Fprintf(stdout, "the store %s is sound: %d values checked\n", where, vr.Values)
		return 0
	}
	if !pg.IsDSN(out) {
		fmt.Fprintln(stderr, "verifierd store salvage: --out must name another, empty PostgreSQL database postgres://USER@HOST:PORT/DATABASE (the password: --store-password-env, the same for both)")
		return 2
	}
	dst, err := pg.Open(ctx, out, pg.Options{PasswordEnv: passwordEnv})
	if err != nil {
		fmt.Fprintln(stderr, "verifierd: --out:", err)
		return 2
	}
	defer dst.Close()
	if dst.Where() == src.Where() {
		fmt.Fprintln(stderr, "verifierd store salvage: --out must be another database than --store")
		return 2
	}
	rep, err := src.SalvageInto(ctx, dst, evidenceKey)
	switch {
	case errors.Is(err, pg.ErrTargetNotEmpty):
		err = fmt.Errorf("--out: %w", err)
	case errors.Is(err, store.ErrEvidenceKey):
		err = fmt.Errorf("%w; %s", err, evidenceKeyHint)
	}
	if err != nil {
		fmt.Fprintln(stderr, "verifierd:", err)
		return 1
	}
	fmt.Fprintf(stdout, "salvaged into postgres %s: %d sessions, %d results, %d re-verifications, %d baseline chunks, %d ledger entries, %d receipts, %d reward records\n",
		dst.Where(), rep.Sessions, rep.Results, rep.Reverifications, rep.BaselineChunks, rep.LedgerEntries, rep.Receipts, rep.RewardRecords)
	reportSkipped(rep.Skipped, rep.Damaged, stdout)
	return 0
}
