package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	sqladapter "github.com/verifierd/verifierd/adapters/sql"
	"github.com/verifierd/verifierd/internal/config"
	"github.com/verifierd/verifierd/sdk/refusal"
)

// cmdAuditTables is the table-delta audit around a whole run:
//
//	verifyctl audit-tables --deployment FILE --tables a,b --snapshot OUT.json
//	   ... the run ...
//	verifyctl audit-tables --deployment FILE --tables a,b --expect a=+1,b=0 --before OUT.json
//
// It connects to the deployment's sql system of record itself (not through
// a daemon), counts rows in one read-only transaction, and resolves
// sql_password_env from its own environment. The audit prints its verdict
// and exits 0 whatever it is; bad input exits 2; a snapshot that cannot be
// taken exits 3 (there is no baseline: do not run).
func cmdAuditTables(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("audit-tables", flag.ContinueOnError)
	fs.SetOutput(stderr)
	deployment := fs.String("deployment", "", "deployment file (YAML) whose effects name a sql system of record")
	tableList := fs.String("tables", "", "audited tables, comma-separated (table or schema.table)")
	snapshotOut := fs.String("snapshot", "", "take the counts before the run and write them to this file")
	beforeIn := fs.String("before", "", "the snapshot taken before the run: audit the counts now against it")
	expectList := fs.String("expect", "", "expected row-count deltas, e.g. a=+1,b=0 (tables not named: 0)")
	candidate := fs.Int("candidate", -1, "which candidate of the effects section to read, when several are sql")
	timeout := fs.Duration("timeout", time.Minute, "deadline of the counting")
	if err := fs.Parse(args); err != nil {
		return exitInvalid
	}
	invalid := func(format string, a ...any) int {
		writeJSON(stdout, map[string]any{"error": map[string]any{"code": "INVALID_ARGUMENT", "message": fmt.Sprintf(format, a...)}})
		return exitInvalid
	}
	switch {
	case fs.NArg() > 0:
		return invalid("unexpected argument %q", fs.Arg(0))
	case *deployment == "" || *tableList == "":
		return invalid("needs --deployment FILE and --tables a,b")
	case (*snapshotOut == "") == (*beforeIn == ""):
		return invalid("give --snapshot OUT.json (before the run) or --before SNAPSHOT (after it), one of them")
	case *snapshotOut != "" && *expectList != "":
		return invalid("--expect goes with --before, after the run")
	case *timeout <= 0:
		return invalid("--timeout must be positive")
	}
	tables, err := sqladapter.ParseTables(*tableList)
	if err != nil {
		return invalid("--tables: %v", err)
	}
	expect, err := sqladapter.ParseExpect(*expectList, tables)
	if err != nil {
		return invalid("--expect: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	counter, err := openCounter(ctx, *deployment, *candidate)
	if err != nil {
		return invalid("%v", err)
	}
	defer counter.Close()

	if *snapshotOut != "" {
		counts, err := counter.Count(ctx, tables)
		if err != nil {
			writeJSON(stdout, map[string]any{"error": map[string]any{"code": "UNAVAILABLE",
				"message": fmt.Sprintf("cannot count the rows of %s: %v; without a baseline there is nothing to audit: do not run", counter.Source(), err)}})
			return exitRefused
		}
		snap := sqladapter.Snapshot{Source: counter.Source(), TakenAt: time.Now().UTC(), Counts: counts}
		data, _ := json.MarshalIndent(snap, "", "  ")
		if err := os.WriteFile(*snapshotOut, append(data, '\n'), 0o600); err != nil {
			return invalid("--snapshot: %v", err)
		}
		writeJSON(stdout, map[string]any{"snapshot": *snapshotOut, "source": snap.Source, "taken_at": snap.TakenAt, "counts": counts})
		return exitOK
	}

	snap, err := readSnapshot(*beforeIn)
	if err != nil {
		return invalid("--before: %v", err)
	}
	if snap.Source != counter.Source() {
		return invalid("--before: the snapshot counted %s, but the deployment reads %s", snap.Source, counter.Source())
	}
	var missing []string
	for _, t := range tables {
		if _, ok := snap.Counts[t.String()]; !ok {
			missing = append(missing, t.String())
		}
	}
	if len(missing) > 0 {
		return invalid("--before: the snapshot has no count for %s; audit the tables it was taken for (%s)", strings.Join(missing, ", "), strings.Join(slices.Sorted(maps.Keys(snap.Counts)), ","))
	}
	after, err := counter.Count(ctx, tables)
	unreadable := ""
	if err != nil {
		after, unreadable = nil, fmt.Sprintf("%s: %v", counter.Source(), err)
	}
	writeJSON(stdout, sqladapter.AuditDeltas(tables, snap.Counts, after, expect, unreadable))
	return exitOK
}

// openCounter reads the deployment, picks its sql section and resolves
// the password variable from verifyctl's own environment.
func openCounter(ctx context.Context, path string, index int) (*sqladapter.Counter, error) {
	dep, err := config.ReadDeployment(path)
	if err != nil {
		return nil, fmt.Errorf("--deployment: %v", err)
	}
	var sqlCands []config.Candidate
	for _, c := range dep.Candidates {
		if c.Kind == sqladapter.Kind && (index < 0 || c.Index == index) {
			sqlCands = append(sqlCands, c)
		}
	}
	switch {
	case len(sqlCands) == 0 && index >= 0:
		return nil, fmt.Errorf("--candidate %d: no such sql candidate in %s", index, path)
	case len(sqlCands) == 0:
		return nil, fmt.Errorf("--deployment: %s has no kind: sql section; the table audit counts rows of a database", path)
	case len(sqlCands) > 1:
		return nil, fmt.Errorf("--deployment: %s has %d sql candidates; pick one with --candidate INDEX", path, len(sqlCands))
	}
	c := sqlCands[0]
	secrets := map[string]string{}
	for slot, name := range c.Secrets {
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return nil, fmt.Errorf("candidates[%d].%s: environment variable %s is not set in verifyctl's environment", c.Index, slot, name)
		}
		secrets[slot] = v
	}
	section, err := json.Marshal(c.Section)
	if err != nil {
		return nil, fmt.Errorf("--deployment: %v", err)
	}
	counter, err := sqladapter.OpenCounter(ctx, section, secrets)
	if err != nil {
		var ce *refusal.Error
		if errors.As(err, &ce) && ce.Path != "" {
			return nil, fmt.Errorf("candidates[%d].%s: %s", c.Index, ce.Path, ce.Message)
		}
		return nil, fmt.Errorf("candidates[%d]: %v", c.Index, err)
	}
	return counter, nil
}

func readSnapshot(path string) (sqladapter.Snapshot, error) {
	var snap sqladapter.Snapshot
	data, err := os.ReadFile(path)
	if err != nil {
		return snap, err
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&snap); err != nil {
		return snap, fmt.Errorf("%s is not a snapshot written by audit-tables --snapshot: %v", path, err)
	}
	if snap.Source == "" || snap.Counts == nil {
		return snap, fmt.Errorf("%s is not a snapshot written by audit-tables --snapshot", path)
	}
	return snap, nil
}
