package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The adversary matrix: every adversarial change (a row) applied on every
// proof path (a column: Verify, Reverify, FinishRun, RollbackCheck, the
// reward score) on every backend (SQLite, PostgreSQL, MariaDB through the
// sql adapter; the REST, GraphQL and FHIR test servers; the jsonl customer
// plugin of sdk/examples; PostgreSQL judged on its write set,
// adversary_writeset_test.go), through the real daemon binary. A cell passes
// when an adversarial row never reaches the positive answer (VERIFIED,
// ROLLED_BACK_VERIFIED, a verified reward or any reward above 0; a
// certified reward of 0 is a refusal), never says HALTED_BEFORE_EFFECT
// while something landed, and carries the row's reason code where the
// rule is specific; the honest row must reach the positive answer, so the
// suite fails both ways. A cell a backend cannot express is listed as not
// applicable with its reason. The suite ends with a summary (cells run,
// n/a, false accepts) and fails on any false accept.

// The proof paths (columns).
const (
	colVerify   = "Verify"
	colReverify = "Reverify"
	colFinish   = "FinishRun"
	colRollback = "RollbackCheck"
	colReward   = "ScoreEpisode"
)

var advColumns = []string{colVerify, colReverify, colFinish, colRollback, colReward}

// The deployments every backend's daemon registers: adv is the backend's
// sound read (a census, or newness: whole_read on a read that is whole);
// adv_settle the same read with a settle window of advSettleS; adv_capped
// a read with a cap (max_records, max_pages) the truncation row overflows.
const (
	depMain   = "adv"
	depSettle = "adv_settle"
	depCapped = "adv_capped"
	// advSettleS is the settle window of adv_settle: generous, so the
	// late duplicate lands inside it however busy the machine is.
	advSettleS = 5
)

// advRow is one adversarial change (or the honest control).
type advRow struct {
	name   string
	honest bool
	// code is the reason the Verify answer must carry ("" when the rule
	// is not specific for every backend).
	code string
	// codeOn overrides code per backend.
	codeOn map[string]string
	// dep is the deployment the row reads through (depMain when empty).
	dep string
	// workflow is the workflow the row's sessions begin (advWorkflowName
	// when empty; advStrictName forbids other writes).
	workflow string
	// naDefault is why a backend without the row's capability cannot
	// express it, when its na map gives no reason of its own.
	naDefault string
	// needs says which capability of the backend the row uses; a backend
	// without it must give the reason in its na map.
	needs func(b *advBackend) bool
	// seed runs before Begin (or before the run's step) and returns what
	// the change needs, usually the id of an existing record.
	seed func(t *testing.T, b *advBackend, subject string) string
	// write: the automation's honest save happens (before adversary).
	write bool
	// adversary is the change itself.
	adversary func(t *testing.T, b *advBackend, subject, seeded string)
	// timing: "" (before Verify), "during" (inside Verify's settle
	// window) or "after" (after Verify answered).
	timing string
	// na gives, per column, why the row does not apply on any backend.
	na map[string]string
}

// advOther is the other subject of a row's seeded record.
func advOther(subject string) string { return subject + "-other" }

func seedOther(t *testing.T, b *advBackend, subject string) string {
	return b.insert(t, advOther(subject), b.in)
}

func seedOutOfScope(t *testing.T, b *advBackend, subject string) string {
	return b.insert(t, subject, b.out)
}

func insertOne(t *testing.T, b *advBackend, subject, _ string) { b.insert(t, subject, b.in) }

func canUpdate(b *advBackend) bool { return b.update != nil }
func canRemove(b *advBackend) bool { return b.remove != nil }

// advRows are the rows of the matrix.
func advRows() []advRow {
	const noScore = "the reward contract reads through the backend's main deployment, which has no settle window, and an episode is scored once: a duplicate landing after the score is a later event no score can see"
	return []advRow{
		{name: "honest", honest: true, write: true},
		{name: "re-point", code: "EXISTING_RECORD_CHANGED", needs: canUpdate, seed: seedOther,
			adversary: func(t *testing.T, b *advBackend, subject, id string) { b.update(t, id, subject, b.in) }},
		{name: "edit into scope", code: "EXISTING_RECORD_CHANGED", needs: canUpdate, seed: seedOutOfScope,
			adversary: func(t *testing.T, b *advBackend, subject, id string) { b.update(t, id, subject, b.in) }},
		{name: "delete another subject's record", code: "COLLATERAL_LOSS", needs: canRemove, seed: seedOther, write: true,
			adversary: func(t *testing.T, b *advBackend, _, id string) { b.remove(t, id) }},
		{name: "soft delete", codeOn: map[string]string{"sqlite": "COLLATERAL_LOSS", "postgres": "COLLATERAL_LOSS", "mariadb": "COLLATERAL_LOSS", advWriteSetName: "COLLATERAL_LOSS"},
			needs: func(b *advBackend) bool { return b.trash != nil }, seed: seedOther, write: true,
			adversary: func(t *testing.T, b *advBackend, _, id string) { b.trash(t, id) }},
		{name: "double submit", code: "COUNT_OVER", write: true, adversary: insertOne},
		{name: "late duplicate in the settle window", code: "COUNT_OVER", dep: depSettle, write: true, adversary: insertOne, timing: "during",
			na: map[string]string{
				colRollback: "the settle window is Verify's: a duplicate landing after the undo is the RollbackCheck cell of the late duplicate after Verify",
				colReward:   noScore,
			}},
		{name: "late duplicate after Verify", write: true, adversary: insertOne, timing: "after",
			na: map[string]string{
				colVerify:   "Verify answered before the duplicate landed, and its answer was true then; the later proof paths must see it",
				colReverify: "Reverify refuses a session whose result was VERIFIED (docs/receipts.md); FinishRun and RollbackCheck must see the duplicate",
				colReward:   noScore,
			}},
		{name: "duplicate invisible to the read credential", write: true, codeOn: map[string]string{advWriteSetName: "COUNT_OVER"},
			needs:     func(b *advBackend) bool { return b.hidden != nil },
			adversary: func(t *testing.T, b *advBackend, subject, _ string) { b.hidden(t, subject, b.in) }},
		{name: "truncation past the cap", dep: depCapped, codeOn: map[string]string{"rest": "READ_MAY_BE_TRUNCATED", "graphql": "READ_MAY_BE_TRUNCATED", "fhir": "READ_INCOMPLETE"},
			needs: func(b *advBackend) bool { return b.fillCap != nil }, write: true,
			seed:      func(t *testing.T, b *advBackend, _ string) string { b.fillCap(t); return "" },
			adversary: insertOne,
			na:        map[string]string{colReward: "the reward contract names the backend's main deployment, which has no cap"}},
		{name: "identity spelt differently", code: "COUNT_OVER", write: true,
			needs:     func(b *advBackend) bool { return b.absolute != nil },
			adversary: func(t *testing.T, b *advBackend, subject, _ string) { b.absolute(t, subject, b.in) }},
		{name: "multi-valued field",
			needs:     func(b *advBackend) bool { return b.multi != nil },
			adversary: func(t *testing.T, b *advBackend, subject, _ string) { b.multi(t, subject, advOther(subject), b.in) }},
		{name: "slow page", code: "COUNT_OVER", write: true,
			needs: func(b *advBackend) bool { return b.slow != nil },
			adversary: func(t *testing.T, b *advBackend, subject, _ string) {
				b.insert(t, subject, b.in)
				b.slow(true)
				t.Cleanup(func() { b.slow(false) })
			}},
		{name: "write outside the read collection", code: "OTHER_WRITE", workflow: advStrictName, write: true,
			needs:     func(b *advBackend) bool { return b.other != nil },
			naDefault: "forbid_other_writes is judged only on a write set (changes:); a read, narrowed or whole, cannot see a write to a table it does not read",
			adversary: func(t *testing.T, b *advBackend, subject, _ string) { b.other(t, subject) },
			na:        map[string]string{colReward: "the reward contract's required effect does not forbid other writes: the reward path is the main contract's"}},
		// Last: it empties the backend's tables.
		{name: "table truncated", code: "CHANGES_UNUSABLE", write: true,
			needs:     func(b *advBackend) bool { return b.truncate != nil },
			naDefault: "a TRUNCATE is a write-set case (the log carries no row images of it); on a read, an emptied table is the delete row's loss",
			adversary: func(t *testing.T, b *advBackend, _, _ string) { b.truncate(t) }},
	}
}

// advBackend is one system of record with its daemon and the operations
// the rows need; a nil operation is one the backend cannot express, and
// na says why.
type advBackend struct {
	name string
	d    *daemon
	dir  string
	// subj and typ are the record fields the contract matches; in and out
	// the values of typ inside and outside the contract's scope.
	subj, typ, in, out string
	// subject makes a run parameter value from a cell's name (FHIR wants
	// a reference, Patient/…).
	subject func(name string) string
	// newness is how the main deployment proves newness: census or
	// whole_read.
	newness string
	// deployments are the files of depMain, depSettle and depCapped.
	deployments map[string]string

	// The automation's writes: insert a record (its id), update one in
	// place (re-point, edit), remove or trash one, insert one the read
	// credential cannot select, write the subject spelt another way, a
	// record with two values in its subject field, and make the server
	// answer slowly. nil: the backend cannot (na says why).
	insert   func(t *testing.T, subject, typ string) string
	update   func(t *testing.T, id, subject, typ string)
	remove   func(t *testing.T, id string)
	trash    func(t *testing.T, id string)
	hidden   func(t *testing.T, subject, typ string)
	absolute func(t *testing.T, subject, typ string)
	multi    func(t *testing.T, subject, other, typ string)
	slow     func(on bool)
	// fillCap leaves the store so that the capped read holds one record
	// less than its cap after the honest save.
	fillCap func(t *testing.T)
	// other writes, in the step, a record outside the read collection
	// (another table the deployment's changes: declares); truncate
	// empties the tables (TRUNCATE). nil: the backend cannot.
	other    func(t *testing.T, subject string)
	truncate func(t *testing.T)
	// reads counts the reads the system of record has served (HTTP
	// requests, PostgreSQL's table scans, MariaDB's SELECTs): the settle
	// hook. nil for SQLite and the jsonl file, which count nothing: there
	// the late duplicate lands right after Verify is called, before or
	// after its first read, and the answer must be the same.
	reads func() int
	// released is the code a Reverify may carry in place of the row's
	// when the evidence it needs was released after Verify (the write
	// set's log: CHANGES_UNUSABLE); "" when none.
	released string
	// na is, per row, why the backend cannot express it; a "row|column"
	// key overrides the row's own na reason of that column.
	na map[string]string
	// digest is the reward contract's digest, after calibration.
	digest string
	// envVars are the daemon's variables (passwords, tokens: ADV_*).
	envVars []string
}

// advTally counts the cells of the whole matrix.
var advTally = struct {
	sync.Mutex
	run, na, falseAccepts, failed int
	lines                         []string
	// byColumn counts false accepts per proof path.
	byColumn map[string]int
	// seen holds "backend|row|column" of every recorded cell, started
	// every cell whose subtest began.
	seen, started map[string]bool
}{byColumn: map[string]int{}, seen: map[string]bool{}, started: map[string]bool{}}

func advRecord(backend, row, col, result, detail string) {
	advTally.Lock()
	defer advTally.Unlock()
	switch result {
	case "n/a":
		advTally.na++
	case "FALSE ACCEPT":
		advTally.run++
		advTally.falseAccepts++
		advTally.byColumn[col]++
		advTally.failed++
	case "FAIL":
		advTally.run++
		advTally.failed++
	default:
		advTally.run++
	}
	advTally.seen[backend+"|"+row+"|"+col] = true
	advTally.lines = append(advTally.lines, fmt.Sprintf("%-17s | %-44s | %-13s | %-12s | %s", backend, row, col, result, detail))
}

// TestAdversaryMatrix runs every backend's cells, one daemon per backend,
// backends one after another, and fails on any false accept.
func TestAdversaryMatrix(t *testing.T) {
	backends := []struct {
		name  string
		start func(t *testing.T) *advBackend
	}{
		{"sqlite", advSQLite},
		{"postgres", advPostgres},
		{"mariadb", advMariaDB},
		{"rest", advREST},
		{"graphql", advGraphQL},
		{"fhir", advFHIR},
		{"jsonl", advJSONL},
		{"postgres-writeset", advPostgresWriteSet},
	}
	advTally.Lock()
	advTally.run, advTally.na, advTally.falseAccepts, advTally.failed = 0, 0, 0, 0
	advTally.lines, advTally.byColumn = nil, map[string]int{}
	advTally.seen, advTally.started = map[string]bool{}, map[string]bool{}
	advTally.Unlock()
	for _, be := range backends {
		ran, up := false, false // -run may leave a backend out
		t.Run(be.name, func(t *testing.T) {
			ran = true
			b := be.start(t)
			b.startDaemon(t)
			up = true
			for _, row := range advRows() {
				t.Run(row.name, func(t *testing.T) { b.runRow(t, row) })
			}
		})
		if ran {
			advUnfinished(be.name, !up)
		}
	}
	advTally.Lock()
	defer advTally.Unlock()
	sort.Strings(advTally.lines)
	t.Logf("adversary matrix cells:\n%s", strings.Join(advTally.lines, "\n"))
	var perColumn []string
	for _, col := range advColumns {
		perColumn = append(perColumn, fmt.Sprintf("%s %d", col, advTally.byColumn[col]))
	}
	t.Logf("adversary matrix summary: %d cells run, %d n/a, %d false accepts (%s), %d failed cells",
		advTally.run, advTally.na, advTally.falseAccepts, strings.Join(perColumn, ", "), advTally.failed)
	if advTally.falseAccepts > 0 {
		t.Errorf("%d false accepts (must be 0)", advTally.falseAccepts)
	}
}

// advUnfinished records as failed every cell of the backend that began
// and ended without an answer (a Begin was refused, a command failed), or
// every cell when the backend did not start: no cell leaves the count
// silently.
func advUnfinished(backend string, notStarted bool) {
	for _, row := range advRows() {
		for _, col := range advColumns {
			key := backend + "|" + row.name + "|" + col
			advTally.Lock()
			open := !advTally.seen[key] && (notStarted || advTally.started[key])
			advTally.Unlock()
			switch {
			case open && notStarted:
				advRecord(backend, row.name, col, "FAIL", "the backend did not start (see its subtest's log)")
			case open:
				advRecord(backend, row.name, col, "FAIL", "the cell ended without an answer (see its subtest's log)")
			}
		}
	}
}

// advStarted marks the cells of cols as begun (a subtest -run selected).
func advStarted(backend, row string, cols ...string) {
	advTally.Lock()
	defer advTally.Unlock()
	for _, col := range cols {
		advTally.started[backend+"|"+row+"|"+col] = true
	}
}

// runRow runs the row's cells on the backend, or lists them n/a.
func (b *advBackend) runRow(t *testing.T, row advRow) {
	if row.needs != nil && !row.needs(b) {
		reason, ok := b.na[row.name]
		if !ok && row.naDefault != "" {
			reason, ok = row.naDefault, true
		}
		if !ok {
			t.Fatalf("backend %s cannot express row %q and gives no reason: add it to its na map", b.name, row.name)
		}
		for _, col := range advColumns {
			advRecord(b.name, row.name, col, "n/a", reason)
		}
		return
	}
	for _, col := range advColumns {
		if reason, ok := row.na[col]; ok {
			if own, ok := b.na[row.name+"|"+col]; ok {
				reason = own
			}
			advRecord(b.name, row.name, col, "n/a", reason)
		}
	}
	_, skipVerify := row.na[colVerify]
	_, skipReverify := row.na[colReverify]
	if !skipVerify || !skipReverify {
		t.Run(colVerify, func(t *testing.T) {
			advStarted(b.name, row.name, colVerify, colReverify)
			b.verifyCells(t, row, !skipVerify, !skipReverify)
		})
	}
	cells := []struct {
		col string
		run func(*testing.T, advRow)
	}{{colFinish, b.finishCell}, {colRollback, b.rollbackCell}, {colReward, b.rewardCell}}
	for _, c := range cells {
		if _, ok := row.na[c.col]; !ok {
			t.Run(c.col, func(t *testing.T) {
				advStarted(b.name, row.name, c.col)
				c.run(t, row)
			})
		}
	}
}

// cellSubject is the run parameter of one cell: distinct per backend, row
// and column, so cells never read each other's records.
func (b *advBackend) cellSubject(row advRow, col string) string {
	slug := strings.NewReplacer(" ", "-", "'", "").Replace(row.name)
	return b.subject(fmt.Sprintf("adv-%s-%s-%s-%d", b.name, slug, strings.ToLower(col), time.Now().UnixNano()%1e6))
}

func (row advRow) workflowName() string {
	if row.workflow == "" {
		return advWorkflowName
	}
	return row.workflow
}

func (row advRow) deployment() string {
	if row.dep == "" {
		return depMain
	}
	return row.dep
}

// wantCode is the reason code the row's Verify answer must carry on b.
func (row advRow) wantCode(b *advBackend) string {
	if c, ok := row.codeOn[b.name]; ok {
		return c
	}
	return row.code
}

// act applies the row's change before Verify: the honest save, then the
// adversary (unless it lands during or after Verify).
func (b *advBackend) act(t *testing.T, row advRow, subject, seeded string) {
	if row.write {
		b.insert(t, subject, b.in)
	}
	if row.adversary != nil && row.timing == "" {
		row.adversary(t, b, subject, seeded)
	}
}

// verifyDuring verifies session, landing the row's late duplicate inside
// the settle window when the row says so: after the first read Verify
// makes (counted by the server, where it counts), else right after Verify
// is called. Either way the duplicate is there before the window closes.
func (b *advBackend) verifyDuring(t *testing.T, row advRow, col, subject, seeded, session string) verifyOutput {
	if row.timing != "during" {
		return b.verifyAny(t, session)
	}
	before := 0
	if b.reads != nil {
		before = b.reads()
	}
	done := make(chan verifyOutput, 1)
	go func() { done <- b.verifyAny(t, session) }()
	for b.reads != nil {
		if n := b.reads(); n > before {
			break
		}
		select {
		case v := <-done:
			// The window closed before the server reported the read: the
			// cell did not test what it names (a harness failure, not
			// the daemon's answer).
			row.adversary(t, b, subject, seeded)
			const why = "harness: Verify answered before the server counted its read; the duplicate never landed inside the window"
			advRecord(b.name, row.name, col, "FAIL", why)
			if col == colVerify {
				advRecord(b.name, row.name, colReverify, "FAIL", why)
			}
			t.Fatalf("%s (Verify answered %s)", why, v.Outcome)
		case <-time.After(10 * time.Millisecond):
		}
	}
	row.adversary(t, b, subject, seeded)
	return <-done
}

// verifyAny verifies without d.verify's fatal on a failed command: it may
// run on a goroutine (verifyDuring), and the cell judges the answer; a
// failed command is an error and answers no outcome.
func (b *advBackend) verifyAny(t *testing.T, session string) verifyOutput {
	out, code := b.d.ctl(t, "verify", "--session", session)
	if code != 0 {
		t.Errorf("verify exit %d: %s", code, out)
		return verifyOutput{Outcome: "<verify failed>"}
	}
	return mustJSON[verifyOutput](t, out)
}

func firstNewness(v verifyOutput) string {
	if len(v.Effects) == 0 {
		return ""
	}
	return v.Effects[0].Newness
}

func (v verifyOutput) codes() []string {
	var codes []string
	for _, e := range v.Effects {
		for _, r := range e.Reasons {
			codes = append(codes, r.Code)
		}
	}
	return codes
}

// judgeOutcome records a cell whose answer is a step outcome (Verify,
// Reverify, FinishRun): positive is VERIFIED.
func (b *advBackend) judgeOutcome(t *testing.T, row advRow, col, outcome string, codes []string, checkCode bool) {
	t.Helper()
	detail := outcome
	if len(codes) > 0 {
		detail += " " + strings.Join(codes, "+")
	}
	switch {
	case row.honest && outcome == "VERIFIED":
		advRecord(b.name, row.name, col, "ok", detail)
	case row.honest:
		advRecord(b.name, row.name, col, "FAIL", detail+" (honest control must be VERIFIED)")
		t.Errorf("%s: honest control answered %s, want VERIFIED", col, detail)
	case outcome == "VERIFIED":
		advRecord(b.name, row.name, col, "FALSE ACCEPT", detail)
		t.Errorf("%s: FALSE ACCEPT: %s answered VERIFIED", col, row.name)
	case outcome == "HALTED_BEFORE_EFFECT":
		advRecord(b.name, row.name, col, "FAIL", detail+" (something landed)")
		t.Errorf("%s: %s answered HALTED_BEFORE_EFFECT although a record landed", col, row.name)
	case checkCode && row.wantCode(b) != "" && !slices.Contains(codes, row.wantCode(b)) &&
		(col != colReverify || b.released == "" || !slices.Contains(codes, b.released)):
		advRecord(b.name, row.name, col, "FAIL", detail+" (want "+row.wantCode(b)+")")
		t.Errorf("%s: %s answered %s, want reason %s", col, row.name, detail, row.wantCode(b))
	default:
		advRecord(b.name, row.name, col, "ok", detail)
	}
}

// verifyCells: a session outside any run; Verify answers, then (when its
// answer was not VERIFIED) Reverify without any repair must not either.
func (b *advBackend) verifyCells(t *testing.T, row advRow, doVerify, doReverify bool) {
	subject := b.cellSubject(row, colVerify)
	var seeded string
	if row.seed != nil {
		seeded = row.seed(t, b, subject)
	}
	out, code := b.d.ctl(t, "begin", "--deployment-name", row.deployment(), "--workflow", row.workflowName(), "--step", "save", "--param", "subject="+subject)
	if code != 0 {
		t.Fatalf("begin exit %d: %s\ndaemon log:\n%.4000s", code, out, b.d.logs())
	}
	session := mustJSON[beginOutput](t, out).SessionID
	b.act(t, row, subject, seeded)
	v := b.verifyDuring(t, row, colVerify, subject, seeded, session)
	if row.timing == "after" {
		row.adversary(t, b, subject, seeded)
	}
	if doVerify {
		b.judgeOutcome(t, row, colVerify, v.Outcome, v.codes(), true)
		// The honest save proves newness the way the deployment declares.
		if row.honest && (len(v.Effects) == 0 || v.Effects[0].Newness != b.newness) {
			t.Errorf("honest save: newness %q, want %q (%s)", firstNewness(v), b.newness, v.summary())
		}
		if row.honest && b.newness == "write_set" {
			checkWriteSetReceipt(t, v, true)
		}
	}
	if !doReverify {
		return
	}
	out, code = b.d.ctl(t, "reverify", "--session", session, "--reason", "nothing was repaired")
	switch {
	case v.Outcome == "VERIFIED" && code == exitRefusedCode:
		// A VERIFIED session is not re-verified: the honest control's
		// answer, and no new acceptance for a row Verify already let by.
		result := "ok"
		if !row.honest {
			result = "ok (refused; Verify's answer stands)"
		}
		advRecord(b.name, row.name, colReverify, result, "refused: the first result was VERIFIED")
	case code != 0:
		advRecord(b.name, row.name, colReverify, "FAIL", fmt.Sprintf("reverify exit %d", code))
		t.Errorf("reverify exit %d: %s", code, out)
	default:
		r := mustJSON[struct {
			Result verifyOutput `json:"result"`
		}](t, out).Result
		b.judgeOutcome(t, row, colReverify, r.Outcome, r.codes(), true)
	}
}

// beginRun opens a run of the adv workflow for subject on the row's
// deployment and begins its save step.
func (b *advBackend) beginRun(t *testing.T, row advRow, subject string) (run, session string) {
	t.Helper()
	out, code := b.d.ctl(t, "run", "begin", "--workflow", row.workflowName(), "--deployment-name", row.deployment(), "--param", "subject="+subject)
	if code != 0 {
		t.Fatalf("run begin exit %d: %s\ndaemon log:\n%.4000s", code, out, b.d.logs())
	}
	run = mustJSON[struct {
		RunID string `json:"run_id"`
	}](t, out).RunID
	return run, b.d.mustStep(t, run, "save")
}

// finishCell: the row's change inside a run's step, then FinishRun.
func (b *advBackend) finishCell(t *testing.T, row advRow) {
	subject := b.cellSubject(row, colFinish)
	var seeded string
	if row.seed != nil {
		seeded = row.seed(t, b, subject)
	}
	run, session := b.beginRun(t, row, subject)
	b.act(t, row, subject, seeded)
	b.verifyDuring(t, row, colFinish, subject, seeded, session)
	if row.timing == "after" {
		row.adversary(t, b, subject, seeded)
	}
	r, code := b.d.runCmd(t, "run", "finish", "--run", run)
	if r.Error != nil {
		advRecord(b.name, row.name, colFinish, "FAIL", "run finish error: "+r.Error.Message)
		t.Fatalf("run finish exit %d: %+v", code, r.Error)
	}
	b.judgeOutcome(t, row, colFinish, r.outcome(), r.reasonCodes(), false)
}

// rollbackCell: the honest save in a run's step, VERIFIED; the save is
// undone, the row's change applied, and RollbackCheck must not find the
// run rolled back (the honest control, with nothing applied, must).
func (b *advBackend) rollbackCell(t *testing.T, row advRow) {
	if b.remove == nil {
		advRecord(b.name, row.name, colRollback, "n/a", b.na["undo"])
		return
	}
	subject := b.cellSubject(row, colRollback)
	var seeded string
	if row.seed != nil {
		seeded = row.seed(t, b, subject)
	}
	run, session := b.beginRun(t, row, subject)
	saved := b.insert(t, subject, b.in)
	if v := b.verifyAny(t, session); v.Outcome != "VERIFIED" {
		advRecord(b.name, row.name, colRollback, "FAIL", "the honest save before the undo answered "+v.summary())
		t.Fatalf("the honest save answered %s, want VERIFIED", v.summary())
	}
	b.remove(t, saved)
	if !row.honest && row.adversary != nil {
		row.adversary(t, b, subject, seeded)
	}
	r, code := b.d.runCmd(t, "run", "rollback-check", "--run", run)
	if r.Error != nil {
		advRecord(b.name, row.name, colRollback, "FAIL", "rollback-check error: "+r.Error.Message)
		t.Fatalf("rollback-check exit %d: %+v", code, r.Error)
	}
	rolledBack := r.RolledBack != nil && *r.RolledBack
	detail := fmt.Sprintf("%s rolled_back=%v remains=%d %s", r.outcome(), rolledBack, len(r.Remains), strings.Join(r.reasonCodes(), "+"))
	positive := rolledBack || r.outcome() == "ROLLED_BACK_VERIFIED"
	switch {
	case row.honest && positive:
		advRecord(b.name, row.name, colRollback, "ok", detail)
	case row.honest:
		advRecord(b.name, row.name, colRollback, "FAIL", detail+" (honest undo must be ROLLED_BACK_VERIFIED)")
		t.Errorf("honest undo: %s, want ROLLED_BACK_VERIFIED", detail)
	case positive:
		advRecord(b.name, row.name, colRollback, "FALSE ACCEPT", detail)
		t.Errorf("FALSE ACCEPT: %s after the undo answered %s", row.name, detail)
	default:
		advRecord(b.name, row.name, colRollback, "ok", detail)
	}
}

// rewardCell: an episode registered for the subject, the row's change,
// then ScoreEpisode; only the honest control may be verified and
// certified.
func (b *advBackend) rewardCell(t *testing.T, row advRow) {
	subject := b.cellSubject(row, colReward)
	var seeded string
	if row.seed != nil {
		seeded = row.seed(t, b, subject)
	}
	episode := "ep-" + strings.NewReplacer("/", "-").Replace(subject)
	out, code := b.d.ctl(t, "episode", "register", "--contract", "adv", "--episode", episode, "--identity", "subject="+subject)
	if code != 0 || !strings.Contains(out, `"baseline_reachable": true`) {
		advRecord(b.name, row.name, colReward, "FAIL", fmt.Sprintf("episode register exit %d", code))
		t.Fatalf("episode register exit %d: %s\n%.4000s", code, out, b.d.logs())
	}
	b.act(t, row, subject, seeded)
	desc := writeFile(t, t.TempDir(), "descriptor.json", fmt.Sprintf(`{"episode_id": %q, "policy_checkpoint_id": "ckpt-adv", "policy_update": 0, "reward_contract_digest": %q}`, episode, b.digest))
	out, code = b.d.ctl(t, "episode", "score", "--descriptor", desc)
	res := mustJSON[map[string]any](t, out)
	rc, _ := res["receipt"].(map[string]any)
	if code != 0 || rc == nil {
		advRecord(b.name, row.name, colReward, "FAIL", fmt.Sprintf("episode score exit %d", code))
		t.Fatalf("episode score exit %d: %s", code, out)
	}
	detail := fmt.Sprintf("reward_outcome=%v scalar_reward=%v certified=%v reason=%v", rc["reward_outcome"], rc["scalar_reward"], rc["certified"], rc["reason_code"])
	if b.newness == "write_set" {
		// The episode is judged on the write set, as Verify is.
		detail += fmt.Sprintf(" newness=%v", rc["newness"])
		if rc["newness"] != "write_set" {
			advRecord(b.name, row.name, colReward, "FAIL", detail+" (want newness write_set)")
			t.Fatalf("episode score: %s, want newness write_set", detail)
		}
	}
	// The positive answer is a reward: a verified outcome or any reward
	// above 0. A certified 0 (wrong_effect) is a correct refusal whose
	// certificate covers the scoring; it is not an acceptance.
	scalar, _ := rc["scalar_reward"].(float64)
	positive := rc["reward_outcome"] == "verified" || scalar > 0
	switch {
	case row.honest && rc["reward_outcome"] == "verified" && rc["certified"] == true:
		advRecord(b.name, row.name, colReward, "ok", detail)
	case row.honest:
		advRecord(b.name, row.name, colReward, "FAIL", detail+" (honest control must be verified and certified)")
		t.Errorf("honest episode: %s, want verified and certified", detail)
	case positive:
		advRecord(b.name, row.name, colReward, "FALSE ACCEPT", detail)
		t.Errorf("FALSE ACCEPT: %s scored %s", row.name, detail)
	default:
		advRecord(b.name, row.name, colReward, "ok", detail)
	}
}
