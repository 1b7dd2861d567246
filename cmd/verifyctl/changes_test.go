package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const changesDeployment = `effects:
  kind: sql
  sql_driver: postgres
  sql_query: SELECT id, patient_id FROM encounters WHERE patient_id = %(pid)s
  sql_query_params: {pid: {param: pid}}
  changes: {source: logical, tables: [encounters, audit.log]}
  sql_connect_args: {host: 127.0.0.1, port: 1, user: verifier_ro, database: clinic}
`

// verifyctl changes refuses bad input naming the fix (exit 2), and
// setup --dry-run, finding the deployment through the daemon config,
// prints what setup would run and the GRANTs without connecting.
func TestChangesCommand(t *testing.T) {
	dep := filepath.Join(t.TempDir(), "deployment.yaml")
	if err := os.WriteFile(dep, []byte(changesDeployment), 0o600); err != nil {
		t.Fatal(err)
	}
	daemon := filepath.Join(filepath.Dir(dep), "daemon.yaml")
	if err := os.WriteFile(daemon, []byte("deployments:\n  clinic-prod: deployment.yaml\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "plain.yaml")
	if err := os.WriteFile(plain, []byte(strings.Replace(changesDeployment, "  changes: {source: logical, tables: [encounters, audit.log]}\n", "  newness: newly_matching\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no operation", []string{"changes"}, ""},
		{"unknown operation", []string{"changes", "create", "--deployment-name", "clinic", "--deployment", dep}, "write setup, status, drop or preflight"},
		{"no name", []string{"changes", "status", "--deployment", dep}, "needs --deployment-name"},
		{"both sources", []string{"changes", "status", "--deployment-name", "clinic", "--deployment", dep, "--config", daemon}, "one of --config"},
		{"unregistered name", []string{"changes", "status", "--deployment-name", "other", "--config", daemon}, `registers no deployment \"other\"`},
		{"bad name", []string{"changes", "status", "--deployment-name", "Clinic!", "--deployment", dep}, "lower-case letters"},
		{"no changes:", []string{"changes", "status", "--deployment-name", "clinic", "--deployment", plain}, "has no candidate with changes:"},
		{"user without password", []string{"changes", "setup", "--deployment-name", "clinic", "--deployment", dep, "--user", "admin"}, "go together"},
		{"dry-run of status", []string{"changes", "status", "--deployment-name", "clinic", "--deployment", dep, "--dry-run"}, "--dry-run goes with setup"},
	} {
		var out, errOut bytes.Buffer
		if code := run(tt.args, strings.NewReader(""), &out, &errOut); code != exitInvalid || !strings.Contains(out.String(), tt.want) {
			t.Errorf("%s: exit %d, %s%s; want exit %d with %q", tt.name, code, out.String(), errOut.String(), exitInvalid, tt.want)
		}
	}
	var out, errOut bytes.Buffer
	code := run([]string{"changes", "setup", "--deployment-name", "clinic-prod", "--config", daemon, "--dry-run"}, strings.NewReader(""), &out, &errOut)
	for _, want := range []string{
		`"slot": "verifierd_clinic_prod"`,
		`CREATE PUBLICATION \"verifierd_clinic_prod\" FOR TABLE \"encounters\", \"audit\".\"log\"`,
		`ALTER TABLE \"audit\".\"log\" REPLICA IDENTITY FULL`,
		`SELECT pg_create_logical_replication_slot('verifierd_clinic_prod', 'pgoutput')`,
		`ALTER ROLE \"verifier_ro\" WITH REPLICATION`,
	} {
		if code != exitOK || !strings.Contains(out.String(), want) {
			t.Errorf("setup --dry-run: exit %d, lacks %s:\n%s%s", code, want, out.String(), errOut.String())
		}
	}
}
