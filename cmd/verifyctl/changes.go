package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	sqladapter "github.com/verifierd/verifierd/adapters/sql"
	"github.com/verifierd/verifierd/internal/changes"
	"github.com/verifierd/verifierd/internal/config"
)

// cmdChanges is the operator's side of the write set (docs/adapters/sql.md,
// "The write set"): the deployment's logical replication slot and
// publication, which the daemon never creates by itself.
//
//	verifyctl changes setup|status|drop|preflight --deployment-name N
//	    (--config DAEMON_YAML | --deployment FILE) [--user ROLE --password-env VAR] [--dry-run]
//
// It connects to the database of the deployment's changes: candidate
// itself (not through a daemon), with the candidate's connection, as
// --user with the password in --password-env when given (setup and drop
// need a table owner with the REPLICATION attribute; the candidate's read
// role does not). Output is JSON; bad input exits 2, a refused operation 3.
func cmdChanges(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: verifyctl changes setup|status|drop|preflight --deployment-name N (--config DAEMON_YAML | --deployment FILE) [--user ROLE --password-env VAR] [--dry-run]")
		return exitInvalid
	}
	op := args[0]
	fs := flag.NewFlagSet("changes "+op, flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("deployment-name", "", "the deployment's registered name (it names the slot verifierd_<name>)")
	deployment := fs.String("deployment", "", "the deployment file (YAML) whose sql candidate declares changes:")
	daemonConfig := fs.String("config", "", "the daemon config: its deployments: entry --deployment-name names the file")
	user := fs.String("user", "", "log in as this role instead of the candidate's (setup and drop: a table owner with REPLICATION)")
	passwordEnv := fs.String("password-env", "", "environment variable holding --user's password")
	dryRun := fs.Bool("dry-run", false, "setup: print the statements and GRANTs without connecting")
	timeout := fs.Duration("timeout", time.Minute, "deadline of the operation")
	if err := fs.Parse(args[1:]); err != nil {
		return exitInvalid
	}
	invalid := func(format string, a ...any) int {
		writeJSON(stdout, map[string]any{"error": map[string]any{"code": "INVALID_ARGUMENT", "message": fmt.Sprintf(format, a...)}})
		return exitInvalid
	}
	switch {
	case op != "setup" && op != "status" && op != "drop" && op != "preflight":
		return invalid("unknown changes command %q; write setup, status, drop or preflight", op)
	case fs.NArg() > 0:
		return invalid("unexpected argument %q", fs.Arg(0))
	case *name == "" || (*deployment == "") == (*daemonConfig == ""):
		return invalid("needs --deployment-name NAME and one of --config DAEMON_YAML (the deployment registered under that name) or --deployment FILE")
	case (*user == "") != (*passwordEnv == ""):
		return invalid("--user and --password-env go together")
	case *dryRun && op != "setup":
		return invalid("--dry-run goes with setup")
	}
	names, err := changes.NamesFor(*name)
	if err != nil {
		return invalid("--deployment-name: %v", err)
	}
	if *daemonConfig != "" {
		if *deployment, err = registeredFile(*daemonConfig, *name); err != nil {
			return invalid("%v", err)
		}
	}
	cand, err := changesCandidate(*deployment)
	if err != nil {
		return invalid("%v", err)
	}
	tables := cand.Changes.Tables
	report := map[string]any{"slot": names.Slot, "publication": names.Publication, "tables": tables}
	if *dryRun {
		report["statements"], report["grants"] = changes.SetupStatements(names, tables), changes.Grants(cand.loginUser())
		writeJSON(stdout, report)
		return exitOK
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	conn, err := cand.connect(ctx, *user, *passwordEnv)
	if err != nil {
		return refusedJSON(stdout, "UNAVAILABLE", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return changesOp(ctx, op, conn, names, cand, report, stdout)
}

// changesOp runs one operation on conn and prints its report.
func changesOp(ctx context.Context, op string, conn *pgx.Conn, names changes.Names, cand *changesCand, report map[string]any, stdout io.Writer) int {
	switch op {
	case "setup":
		if err := changes.Setup(ctx, conn, names, cand.Changes.Tables); err != nil {
			return refusedJSON(stdout, "SETUP_FAILED", err)
		}
		report["statements"] = changes.SetupStatements(names, cand.Changes.Tables)
		// The daemon's login reads the slot: it needs REPLICATION.
		report["grants"] = changes.Grants(cand.loginUser())
		report["retention"] = "the slot keeps the server's log from the oldest open session's position; watch verifyctl changes status (retained_bytes) and max_slot_wal_keep_size"
	case "status":
		st, err := changes.Status(ctx, conn, names)
		if err != nil {
			return refusedJSON(stdout, "UNAVAILABLE", err)
		}
		report["status"] = st
	case "drop":
		if err := changes.Drop(ctx, conn, names); err != nil {
			return refusedJSON(stdout, "DROP_FAILED", err)
		}
		report["dropped"] = true
	case "preflight":
		problems := changes.Preflight(ctx, conn, names, cand.Changes.Tables)
		report["problems"] = append([]string{}, problems...)
		writeJSON(stdout, report)
		if len(problems) > 0 {
			return exitRefused
		}
		return exitOK
	}
	writeJSON(stdout, report)
	return exitOK
}

func refusedJSON(stdout io.Writer, code string, err error) int {
	writeJSON(stdout, map[string]any{"error": map[string]any{"code": code, "message": err.Error()}})
	return exitRefused
}

// registeredFile is the file the daemon config at path registers as
// deployment name.
func registeredFile(path, name string) (string, error) {
	d, err := config.LoadDaemon(path)
	if err != nil {
		return "", fmt.Errorf("--config: %v", err)
	}
	file, ok := d.Deployments[name]
	if !ok {
		return "", fmt.Errorf("--config: %s registers no deployment %q under deployments:; name one it registers", path, name)
	}
	return file, nil
}

// changesCand is the deployment's one candidate with changes:.
type changesCand struct{ *config.Candidate }

// changesCandidate reads the deployment and picks its candidate with
// changes:.
func changesCandidate(path string) (*changesCand, error) {
	dep, err := config.ReadDeployment(path)
	if err != nil {
		return nil, fmt.Errorf("--deployment: %v", err)
	}
	var found []*config.Candidate
	for i := range dep.Candidates {
		if dep.Candidates[i].Changes != nil {
			found = append(found, &dep.Candidates[i])
		}
	}
	switch {
	case len(found) == 0:
		return nil, fmt.Errorf("--deployment: %s has no candidate with changes:; declare changes: {source: logical, tables: [...]} on its sql candidate", path)
	case len(found) > 1:
		return nil, fmt.Errorf("--deployment: %s has %d candidates with changes:; one slot serves one candidate, so declare it on one", path, len(found))
	}
	return &changesCand{found[0]}, nil
}

// connArgs is the candidate's sql_connect_args.
func (c *changesCand) connArgs() map[string]any {
	args, _ := c.Section["sql_connect_args"].(map[string]any)
	return args
}

// loginUser is the role the daemon reads the log as.
func (c *changesCand) loginUser() string {
	for _, k := range []string{"user", "username"} {
		if u, ok := c.connArgs()[k].(string); ok {
			return u
		}
	}
	return "<the candidate's login>"
}

// connect opens the candidate's connection, as user with the password in
// passwordEnv when given, else with sql_password_env from verifyctl's own
// environment.
func (c *changesCand) connect(ctx context.Context, user, passwordEnv string) (*pgx.Conn, error) {
	args := map[string]any{}
	for k, v := range c.connArgs() {
		if user != "" && (k == "user" || k == "username") {
			continue
		}
		args[k] = v
	}
	env := c.Secrets["sql_password_env"]
	if user != "" {
		args["user"], env = user, passwordEnv
	}
	password := ""
	if env != "" {
		v, ok := os.LookupEnv(env)
		if !ok {
			return nil, fmt.Errorf("the environment variable %s is not set in verifyctl's environment", env)
		}
		password = v
	}
	cc, err := sqladapter.PostgresConnConfig(args, password)
	if err != nil {
		return nil, fmt.Errorf("candidates[%d]: %v", c.Index, err)
	}
	return pgx.ConnectConfig(ctx, cc)
}
