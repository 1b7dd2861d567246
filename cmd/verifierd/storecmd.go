package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/verifierd/verifierd/internal/store"
)

const storeUsage = `usage: verifierd store check   --data-dir DIR            read-only integrity check: exit 0 sound, 1 corrupt, 2 not checked
       verifierd store compact --data-dir DIR            rewrite the store compactly (the daemon must be stopped)
       verifierd store salvage --data-dir DIR --out DIR  copy what is readable into a fresh store in --out`

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
	out := fs.String("out", "", "salvage: an empty dir for the fresh store")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	fail := func(err error) int {
		if errors.Is(err, store.ErrLocked) {
			err = fmt.Errorf("%w; stop that verifierd first", err)
		}
		fmt.Fprintln(stderr, "verifierd:", err)
		return 1
	}
	switch cmd {
	case "check":
		rep, err := store.Check(*dataDir)
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
		fmt.Fprintf(stdout, "the store %s is sound: %d pages of %d bytes, transaction %d\n", rep.Path, rep.HighWater, rep.PageSize, rep.TxID)
		for _, n := range rep.Notes {
			fmt.Fprintln(stdout, "note:", n)
		}
		return 0
	case "compact":
		res, err := store.Compact(*dataDir)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "compacted %s: %d sessions kept, %d bytes -> %d bytes\n", filepath.Join(*dataDir, "verifierd.db"), res.Sessions, res.BytesBefore, res.After)
		return 0
	default: // salvage
		if *out == "" {
			fmt.Fprintln(stderr, "verifierd store salvage: --out DIR is required")
			return 2
		}
		rep, err := store.Salvage(*dataDir, *out)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "salvaged into %s: %d sessions, %d results, %d baselines, %d ledger entries\n", filepath.Join(*out, "verifierd.db"), rep.Sessions, rep.Results, rep.Baselines, rep.LedgerEntries)
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
		for _, d := range rep.Damage {
			fmt.Fprintf(stdout, "damage: page %d: %s\n", d.Page, d.Problem)
		}
		if len(rep.Damage) > 0 {
			fmt.Fprintln(stdout, "records on damaged pages that nothing else names are lost without a trace; keep the old store until you are satisfied")
		}
		return 0
	}
}
