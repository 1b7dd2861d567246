package config

import (
	"fmt"
	"regexp"

	"github.com/verifierd/verifierd/sdk/unstable/deployment"
)

// A sql candidate on PostgreSQL may declare changes:, the write set
// (docs/adapters/sql.md, "The write set"): the daemon reads every committed
// change to the declared tables between Begin and each Verify poll from
// the database's change log, and the judge proves newness and loss on it
// (judge.Options.WriteSet) instead of a census, however the read is
// narrowed. The log is read with the candidate's own connection
// (sql_connect_args, sql_password_env).

// NewnessWriteSet is what results record for a candidate with changes:.
const NewnessWriteSet = "write_set"

// ChangesSourceLogical is the changes: source of PostgreSQL logical
// decoding (internal/changes.Postgres).
const ChangesSourceLogical = "logical"

// ChangesSetting is a candidate's changes: section.
type ChangesSetting struct {
	// Source is the change log: ChangesSourceLogical.
	Source string
	// Tables are the tables whose committed changes are read, as written
	// (table or schema.table).
	Tables []string
}

// tableNameRE is a table name changes: accepts: an identifier, optionally
// schema-qualified.
var tableNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?$`)

// parseChanges reads a candidate's changes: key.
func parseChanges(c *Candidate, sec map[string]any, path string) error {
	raw, ok := sec["changes"]
	if !ok || raw == nil {
		return nil
	}
	path += ".changes"
	if driver, _ := c.Section["sql_driver"].(string); c.Kind != "sql" || driver != "postgres" {
		return errorf(path, "the write set is read from PostgreSQL's logical decoding: only a kind: sql candidate with sql_driver: postgres may declare changes: (a MariaDB/MySQL binlog source is not available yet); remove changes:")
	}
	// A census may stand beside the write set: newness stays the write
	// set's, and the census adds the loss the log cannot call one (a soft
	// delete is an update), docs/contracts.md §3b.
	if c.Newness != "" {
		return errorf(path, "a candidate with changes: proves newness by its write set; remove newness:")
	}
	m, isMap := raw.(map[string]any)
	if !isMap {
		return errorf(path, "must be a map: source: logical and tables: [encounters]")
	}
	for k := range m {
		if k != "source" && k != "tables" {
			return errorf(path+"."+k, "unknown key; changes: takes source: and tables:")
		}
	}
	s := &ChangesSetting{}
	if src, _ := m["source"].(string); src != ChangesSourceLogical {
		return errorf(path+".source", "must be %s (PostgreSQL logical decoding with the built-in pgoutput plugin)", ChangesSourceLogical)
	}
	s.Source = ChangesSourceLogical
	list, isList := m["tables"].([]any)
	if !isList || len(list) == 0 {
		return errorf(path+".tables", "must be a non-empty list of the tables whose committed changes are read, e.g. [encounters] or [public.encounters]")
	}
	for i, item := range list {
		t, _ := item.(string)
		if !tableNameRE.MatchString(t) {
			return errorf(fmt.Sprintf("%s.tables[%d]", path, i), "must be a table name (table or schema.table, unquoted identifiers)")
		}
		s.Tables = append(s.Tables, t)
	}
	c.Changes = s
	return nil
}

// DeclaredNewness is the candidate's proven or declared newness, as the
// newness guard (require_proven_newness) reads it: write_set with
// changes:, else its newness: declaration ("" when none).
func (c *Candidate) DeclaredNewness() string {
	if c.Changes != nil {
		return NewnessWriteSet
	}
	return c.Newness
}

// ResolveSecrets looks up the candidate's own secret references (slot ->
// value) under the same rules as Resolve, for the daemon's write-set
// source, which connects as the candidate does.
func (c *Candidate) ResolveSecrets(lookupEnv func(string) (string, bool), allow func(string) bool) (map[string]string, error) {
	out, err := deployment.LookupSecrets(c.Secrets, fmt.Sprintf("candidates[%d]", c.Index), lookupEnv, allow)
	if err != nil {
		return nil, asError(err)
	}
	return out, nil
}
