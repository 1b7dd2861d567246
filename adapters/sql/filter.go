package sql

import (
	"strings"
)

// RefusalError is a query the read-only statement filter refuses. Token
// names what it refused (a keyword, a function, a comment opener, a second
// statement); Reason says what is required instead.
type RefusalError struct {
	Token  string
	Reason string
	// Starts is true when the refusal is about the statement's first
	// keyword rather than something it contains.
	Starts bool
}

// Message is the refusal without the field name, for a *refusal.Error whose
// Path is sql_query.
func (e *RefusalError) Message() string {
	verb := "contains"
	if e.Starts {
		verb = "starts with"
	}
	return "refused: " + verb + " " + e.Token + " (" + e.Reason + ")"
}

func (e *RefusalError) Error() string { return "sql_query: " + e.Message() }

const readOnlyRequired = "a read-only SELECT or WITH is required"

// forbiddenKeywords may not appear as bare words anywhere in a query: they
// write, change the schema, control transactions or sessions, take locks,
// or reach outside the database. Inside a string literal, or as a quoted
// identifier ("delete"), they are harmless text and are allowed.
var forbiddenKeywords = setOf(
	"INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT", "REPLACE",
	"CREATE", "ALTER", "DROP", "TRUNCATE", "GRANT", "REVOKE",
	"COPY", "INTO", "CALL", "EXEC", "EXECUTE", "DO", "SET", "RESET",
	"BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE",
	"LOCK", "UNLOCK", "VACUUM", "ANALYZE", "ANALYSE", "ATTACH", "DETACH", "PRAGMA",
	"REINDEX", "LOAD", "HANDLER", "RETURNING",
	// PostgreSQL statements with effects outside the transaction or that
	// keep state on the session.
	"NOTIFY", "LISTEN", "UNLISTEN", "PREPARE", "DEALLOCATE", "DECLARE", "DISCARD",
	// MySQL's SELECT ... PROCEDURE ANALYSE() runs a procedure.
	"PROCEDURE",
)

// callableKeywords are forbidden keywords that are also ordinary read-only
// functions when called: replace(text, from, to) exists in every engine,
// while REPLACE as a statement (MySQL's REPLACE INTO) is never followed by
// a parenthesis.
var callableKeywords = setOf("REPLACE")

// sideEffectFunctions are functions with known effects outside the read:
// sequences, sleeps and lock waits, files, other connections, server
// control and session settings. They are refused whether or not the call
// is schema-qualified.
var sideEffectFunctions = setOf(
	// PostgreSQL
	"nextval", "setval", "currval", "txid_current", "set_config",
	"pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf",
	"pg_read_file", "pg_read_binary_file", "pg_ls_dir", "pg_notify",
	"pg_logical_emit_message", "pg_switch_wal", "pg_create_restore_point",
	"pg_rotate_logfile", "pg_promote", "pg_backup_start", "pg_backup_stop",
	"pg_start_backup", "pg_stop_backup", "pg_import_system_collations",
	"pg_create_physical_replication_slot", "pg_create_logical_replication_slot",
	"pg_drop_replication_slot",
	// MySQL and MariaDB
	"sleep", "benchmark", "load_file", "get_lock", "release_lock",
	"release_all_locks", "master_pos_wait", "source_pos_wait", "sys_exec", "sys_eval",
	// SQL Server
	"xp_cmdshell",
	// SQLite and its shell's extensions
	"load_extension", "writefile", "readfile", "edit", "fts3_tokenizer",
)

// sideEffectPrefixes name families of such functions.
var sideEffectPrefixes = []string{
	"dblink", "lo_", "pg_advisory", "pg_try_advisory", "pg_write", "pg_sleep",
	"pg_stat_reset", "pg_file_", "pg_replication_origin_", "pg_logical_slot_",
	"pg_replication_slot_advance",
	// query_to_xml(text, ...) runs the query it is given, which the filter
	// never sees.
	"query_to_xml",
}

// lockingPhrases are row-locking clauses; each starts with FOR or LOCK.
var lockingPhrases = [][]string{
	{"FOR", "UPDATE"},
	{"FOR", "NO", "KEY", "UPDATE"},
	{"FOR", "SHARE"},
	{"FOR", "KEY", "SHARE"},
	{"LOCK", "IN", "SHARE", "MODE"},
}

// genericDialects are the readings CheckReadOnly applies: PostgreSQL's
// (standard strings, E'text' and dollar quotes) and one where backslashes escape
// inside quotes, as MySQL and PostgreSQL without standard_conforming_strings
// read them. A query must pass both, so text cannot hide in a literal under
// one reading while running as code under the other.
var genericDialects = []dialect{postgresDialect, backslashDialect}

// CheckReadOnly refuses a query unless it is one read-only statement:
// exactly one statement (a trailing ';' is allowed), starting with SELECT or
// WITH, without comments, without any keyword that writes, changes the
// schema, controls a transaction or takes a lock (FOR UPDATE, FOR SHARE,
// LOCK IN SHARE MODE, RETURNING, INTO ...), and without calls to functions
// known to have side effects (nextval, pg_sleep, dblink*, lo_*, sleep,
// load_file ...). Keywords inside string literals, dollar-quoted strings and
// quoted identifiers are text, not code, and are allowed.
//
// The filter catches configuration mistakes early; it is defence in depth.
// The enforcement is the read-only connection and transaction the adapter
// reads through, and a database role that can only read.
//
// The error is a *RefusalError naming the offending token.
func CheckReadOnly(query string) error {
	for _, d := range genericDialects {
		if err := checkReadOnly(query, d); err != nil {
			return err
		}
	}
	return nil
}

// checkForDriver applies CheckReadOnly and then the driver's own reading of
// quotes: SQLite's [bracketed] identifiers, and for SQLite and MySQL no
// dollar quotes. PostgreSQL's reading is one of CheckReadOnly's own.
func checkForDriver(query, driver string) error {
	if err := CheckReadOnly(query); err != nil {
		return err
	}
	switch driver {
	case driverSQLite:
		return checkReadOnly(query, sqliteDialect)
	case driverMySQL:
		return checkReadOnly(query, mysqlDialect)
	}
	return nil
}

func checkReadOnly(query string, d dialect) error {
	if strings.TrimSpace(query) == "" {
		return &RefusalError{Token: "nothing", Reason: "write one SELECT or WITH statement"}
	}
	toks, lerr := lex(query, d)
	if lerr != nil {
		return &RefusalError{Token: lerr.token, Reason: lerr.reason}
	}
	for i, t := range toks {
		if err := checkToken(toks, i, t); err != nil {
			return err
		}
	}
	first := toks[0]
	if first.kind != tokWord || (!strings.EqualFold(first.text, "SELECT") && !strings.EqualFold(first.text, "WITH")) {
		return &RefusalError{Token: describe(first), Reason: readOnlyRequired, Starts: true}
	}
	for i, t := range toks {
		if t.kind == tokPunct && t.text == ";" && i != len(toks)-1 {
			return &RefusalError{Token: "a second statement after ;", Reason: "one statement only; a single trailing ; is allowed"}
		}
	}
	return nil
}

func checkToken(toks []token, i int, t token) error {
	switch t.kind {
	case tokWord:
		upper := strings.ToUpper(t.text)
		if phrase := phraseAt(toks, i, lockingPhrases); phrase != "" {
			return &RefusalError{Token: phrase, Reason: "row locking is not reading; " + readOnlyRequired}
		}
		if phrase := phraseAt(toks, i, sequencePhrases); phrase != "" {
			return &RefusalError{Token: phrase, Reason: "it advances a sequence; " + readOnlyRequired}
		}
		if forbiddenKeywords[upper] && (!callableKeywords[upper] || !nextIs(toks, i, "(")) {
			return &RefusalError{Token: upper, Reason: readOnlyRequired}
		}
		if name := strings.ToLower(t.text); isSideEffectFunction(name) {
			return &RefusalError{Token: name, Reason: "a function with side effects; " + readOnlyRequired}
		}
	case tokQuotedIdent:
		// A quoted name is not a keyword, but "pg_sleep"(1) still calls
		// pg_sleep.
		if name := strings.ToLower(unquote(t.text)); isSideEffectFunction(name) && nextIs(toks, i, "(") {
			return &RefusalError{Token: name, Reason: "a function with side effects; " + readOnlyRequired}
		}
	}
	return nil
}

func isSideEffectFunction(name string) bool {
	if sideEffectFunctions[name] {
		return true
	}
	for _, p := range sideEffectPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// sequencePhrases advance a sequence: MariaDB's NEXT VALUE FOR seq (and
// NEXTVAL(seq), refused as a function).
var sequencePhrases = [][]string{
	{"NEXT", "VALUE", "FOR"},
}

// phraseAt returns the phrase of phrases starting at toks[i], if any.
func phraseAt(toks []token, i int, phrases [][]string) string {
	for _, phrase := range phrases {
		if i+len(phrase) > len(toks) {
			continue
		}
		match := true
		for k, w := range phrase {
			if t := toks[i+k]; t.kind != tokWord || !strings.EqualFold(t.text, w) {
				match = false
				break
			}
		}
		if match {
			return strings.Join(phrase, " ")
		}
	}
	return ""
}

func nextIs(toks []token, i int, text string) bool {
	return i+1 < len(toks) && toks[i+1].kind == tokPunct && toks[i+1].text == text
}

// unquote strips the quotes around a quoted identifier; doubled quotes stay
// doubled, which is enough to compare it with a function name.
func unquote(s string) string {
	if len(s) >= 2 {
		return s[1 : len(s)-1]
	}
	return s
}

func describe(t token) string {
	switch t.kind {
	case tokWord:
		return strings.ToUpper(t.text)
	case tokString:
		return "a string literal"
	case tokQuotedIdent:
		return "a quoted identifier"
	case tokNumber:
		return "a number"
	}
	return `"` + t.text + `"`
}

func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}
