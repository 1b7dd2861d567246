// Command verifyctl is the verifierd command-line client: preflight, begin
// and verify against a daemon, runs of a whole workflow, and the judge
// conformance harness, which needs no daemon.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/verifierd/verifierd/internal/version"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage: verifyctl [connection flags] <command> [flags]

commands:
  judge --case FILE|-                       judge one conformance case (docs/contracts.md §8) with no daemon
  preflight --deployment-name NAME [--param k=v]
                                            test every candidate's connection (never writes)
  begin --deployment-name NAME (--workflow NAME --step NAME | --effects FILE) [--param k=v]
                                            capture baselines; exit 3: refused, do not actuate
  begin --run RUN --step NAME [--param k=v] begin a step of a run (its own params only); exit 3: refused
        (--deployment FILE instead of --deployment-name: only a daemon run with --allow-inline-deployments)
  verify --session ID [--receipt-out FILE]  judge the session (exit 0 whatever the verdict); the signed receipt under "receipt"
  run begin --workflow NAME --deployment-name NAME [--param k=v] [--run-id ID]
                                            open a run of a registered workflow; prints {"run_id": …}
  run finish --run RUN [--receipt-out FILE] classify and seal the run with a signed run receipt; exit 4: not VERIFIED
  run show --run RUN                        a run, its steps, artifacts and latest receipt
  run rollback-check --run RUN [--receipt-out FILE]
                                            is every change the run made gone? sealed ROLLED_BACK_VERIFIED; exit 4: something remains
  reverify --session ID --reason TEXT       judge a fresh read against the original baseline after a repair
  session --session ID                      show a session's state, its result and any re-verifications
  version                                   print verifyctl's version (the release it was built as, or devel)
  key                                       print the daemon's signing public key and key id
  ledger export > ledger.jsonl              write the daemon's hash-chained ledger as JSON lines, ending with a signed checkpoint
  artifact verify --deployment-name NAME --file PATH [--run RUN --artifact NAME --step STEP]
                                            is exactly this file (digest and size) in the registered store? with --run, recorded in the run
  lint --workflow FILE [--deployment FILE] [--deployment-name NAME] [--require-effects-for-irreversible]
                                            check a workflow's contracts; exit 1: findings under --require-…
  bind --workflow FILE --binding FILE (--check | --out NEW_FILE)
                                            attach reviewed contracts to steps that have none
  audit-tables --deployment FILE --tables a,b (--snapshot OUT | --expect a=+1,b=0 --before SNAPSHOT)  table-delta audit, direct read-only SQL
  changes setup|status|drop|preflight --deployment-name NAME (--config DAEMON_YAML | --deployment FILE)
          [--user ROLE --password-env VAR] [--dry-run]
                                            the write set's logical replication slot and publication (PostgreSQL); setup prints the GRANTs
  receipt verify --receipt FILE (--public-key FILE | --key-id ID) [--expect-session ID] [--expect-deployment NAME] [--expect-step STEP] [--expect-run ID]
                                            check a signed receipt (a verdict's or a run's) offline, and what it is about; exit 1: not valid
  ledger verify --file ledger.jsonl [--public-key FILE | --key-id ID] [--receipt FILE]
                                            check an exported ledger's hash chain offline, and with the key that it ends
                                            at the daemon's signed checkpoint; exit 1: broken, truncated, extended, rewritten
  episode register [--contract NAME] --episode ID --identity k=v
                                            fix an RL episode's subject and read its baseline, before the rollout
  episode score [--contract NAME] --descriptor FILE|-
                                            score the episode: outcome, scalar (null when unscored), signed receipt
  reward contracts                          the registered reward contracts and their digests
  reward get --receipt-id ID                an issued reward
  reward calibrate --contract NAME [--trials 300] [--delta 0.05] [--seed N] --out DIR
                                            calibrate a reward contract; writes calibration.json and a signed certificate.json

connection flags, of every command that talks to a daemon, before the command or after it
(after it, they win):
  --addr HOST:PORT    the daemon's gRPC address (default 127.0.0.1:7443)
  --token-env NAME    environment variable holding the API bearer token
  --tls-ca FILE       CA certificate (PEM) to verify the daemon's TLS; without it the connection is plaintext
  --timeout D         deadline of the call (default 5m)
  --insecure          send the token without --tls-ca to a non-loopback address
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	args, ok := leadingClientFlags(args, stderr)
	if !ok {
		return exitInvalid
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "judge":
		return cmdJudge(args[1:], stdin, stdout, stderr)
	case "preflight":
		return cmdPreflight(args[1:], stdout, stderr)
	case "begin":
		return cmdBegin(args[1:], stdout, stderr)
	case "verify":
		return cmdVerify(args[1:], stdout, stderr)
	case "session":
		return cmdSession(args[1:], stdout, stderr)
	case "lint":
		return cmdLint(args[1:], stdout, stderr)
	case "bind":
		return cmdBind(args[1:], stdout, stderr)
	case "changes":
		return cmdChanges(args[1:], stdout, stderr)
	case "audit-tables":
		return cmdAuditTables(args[1:], stdout, stderr)
	case "receipt":
		return cmdReceipt(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "verifyctl", version.Get())
		return 0
	case "key":
		return cmdKey(args[1:], stdout, stderr)
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "reverify":
		return cmdReverify(args[1:], stdout, stderr)
	case "artifact":
		return cmdArtifact(args[1:], stdout, stderr)
	case "ledger":
		return cmdLedger(args[1:], stdout, stderr)
	case "episode":
		return cmdEpisode(args[1:], stdin, stdout, stderr)
	case "reward":
		return cmdReward(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "verifyctl: unknown command %q\n%s", args[0], usage)
	return 2
}
