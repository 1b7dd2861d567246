package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/verifierd/verifierd/internal/httpapi"
	"github.com/verifierd/verifierd/internal/inflight"
	"github.com/verifierd/verifierd/internal/session"
	"github.com/verifierd/verifierd/judge"
)

// options are the daemon's flags, each field named for its flag
// (--retain-unfinished is RetainUnfinished).
type options struct {
	Listen                   string
	DataDir                  string
	PluginDir                string
	BuiltinDir               string
	Config                   string
	LogLevel                 string
	LogJSON                  bool
	Drain                    time.Duration
	StoreSync                bool
	InitStore                bool
	RetainUnfinished         time.Duration
	Insecure                 bool
	AllowInlineDeployments   bool
	SigningKey               string
	HTTPListen               string
	Store                    string
	StorePasswordEnv         string
	Retain                   time.Duration
	EvidenceKey              string
	SigningKeyEnv            string
	EvidenceKeyEnv           string
	RotateKeys               bool
	MaxInflightBytes         int64
	MaxJudgeRecords          int
	HealthListen             string
	HTTPAllowedHosts         string
	LedgerCheckpointEvery    uint64
	LedgerCheckpointInterval time.Duration
	StoreCheckInterval       time.Duration
	// Connections are --max-connections, --handshake-timeout,
	// --idle-timeout and --http-read-timeout.
	Connections *connLimits

	// allowedHosts is HTTPAllowedHosts parsed (validate).
	allowedHosts httpapi.Hosts
}

// parseOptions reads the daemon's flags and validates them; -h answers
// flag.ErrHelp.
func parseOptions(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("verifierd", flag.ContinueOnError)
	o.register(fs)
	onFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// register adds every flag to fs, with its default and help text.
func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:7443", "address to serve the gRPC API on")
	fs.StringVar(&o.DataDir, "data-dir", "verifierd-data", "folder of the embedded session store")
	fs.StringVar(&o.PluginDir, "plugin-dir", "", "folder of customer adapter binaries (verifier-adapter-<kind>)")
	fs.StringVar(&o.BuiltinDir, "builtin-dir", "", "folder of the first-party adapter binaries (default: beside the verifierd binary)")
	fs.StringVar(&o.Config, "config", "", "daemon config file (YAML): plugin pins, secrets allowlist, API auth, named deployments and workflows, policy")
	fs.StringVar(&o.LogLevel, "log-level", "info", "trace, debug, info, warn or error")
	fs.BoolVar(&o.LogJSON, "log-json", false, "log as JSON lines")
	fs.DurationVar(&o.Drain, "drain", 30*time.Second, "how long SIGTERM waits for in-flight calls")
	fs.BoolVar(&o.StoreSync, "store-sync", true, "fsync every session write; false survives a daemon crash but not a machine crash")
	fs.BoolVar(&o.InitStore, "init-store", false, "accept a missing or empty store in a data dir that held one before (its sessions are lost)")
	fs.DurationVar(&o.RetainUnfinished, "retain-unfinished", 24*time.Hour, "remove sessions begun but never verified after this long, with their baselines (0: keep)")
	fs.BoolVar(&o.Insecure, "insecure", false, "serve a non-loopback --listen address without a bearer token and TLS")
	fs.BoolVar(&o.AllowInlineDeployments, "allow-inline-deployments", false, "development only: accept deployments sent by the caller (who then chooses where the daemon reads); never with secrets or a compensator")
	fs.StringVar(&o.SigningKey, "signing-key", "", "Ed25519 key file that signs receipts (default: <data-dir>/keys/receipt-signing.key, created on first start)")
	fs.StringVar(&o.HTTPListen, "http-listen", "127.0.0.1:7444", "address of the HTTP listener (VerifierService as HTTP/JSON with /openapi.json, reward routes for trainers, /metrics, the operator console at /console/; docs/daemon.md, docs/rewards.md, docs/operations.md); empty: off")
	fs.StringVar(&o.Store, "store", "", "session store: empty for the embedded store in --data-dir, or a PostgreSQL DSN postgres://USER@HOST:PORT/DB?sslmode=… shared by replicas (docs/operations.md)")
	fs.StringVar(&o.StorePasswordEnv, "store-password-env", "", "environment variable holding the PostgreSQL password of --store")
	fs.DurationVar(&o.Retain, "retain", 168*time.Hour, "remove verified sessions, their results and baselines this long after they were verified (ledger entries stay; 0: keep)")
	fs.StringVar(&o.EvidenceKey, "evidence-key", "", "file holding the 32-byte evidence key, the same on every replica of one --store (default: <data-dir>/keys/evidence-hmac.key, created on first start)")
	fs.StringVar(&o.SigningKeyEnv, "signing-key-env", "", "environment variable holding the receipt signing key as a base64 32-byte Ed25519 seed, instead of --signing-key (the same on every replica)")
	fs.StringVar(&o.EvidenceKeyEnv, "evidence-key-env", "", "environment variable holding the 32-byte evidence key in base64, instead of --evidence-key (the same on every replica)")
	fs.BoolVar(&o.RotateKeys, "rotate-keys", false, "adopt this daemon's --evidence-key and --signing-key for a store first written with other keys (a deliberate rotation; docs/operations.md); without it such a store is refused")
	fs.Int64Var(&o.MaxInflightBytes, "max-inflight-bytes", inflight.DefaultBytes, "budget of request bytes the daemon holds at once, gRPC and HTTP together; a request waits up to 1s for room, then fails with ResourceExhausted (HTTP 429); 0: no budget (docs/operations.md)")
	fs.IntVar(&o.MaxJudgeRecords, "max-judge-records", judge.DefaultMaxRecords, "records one Judge request (gRPC or POST /v1/judge) may carry, before and after together, counted before any is decoded; more is refused (InvalidArgument, HTTP 413); 0: no bound (docs/operations.md)")
	fs.StringVar(&o.HealthListen, "health-listen", "", "also serve the gRPC health service alone, in plaintext, on this address (for Kubernetes gRPC probes when the API needs TLS); empty: off")
	fs.StringVar(&o.HTTPAllowedHosts, "http-allowed-hosts", "", "comma-separated host or host:port names the HTTP listener answers for besides localhost and loopback addresses (421 otherwise), e.g. verifierd.example.com; requests with the API token pass on any name")
	o.Connections = connFlags(fs)
	fs.Uint64Var(&o.LedgerCheckpointEvery, "ledger-checkpoint-every", session.DefaultCheckpointEvery, "sign a ledger checkpoint in the transaction of every Nth ledger entry (0: not by count; docs/receipts.md)")
	fs.DurationVar(&o.StoreCheckInterval, "store-check-interval", 5*time.Second, "a shared (PostgreSQL) store: how often to check that it answers and still records this daemon's key ids; a replica whose keys the store no longer records stops serving (every ledger append checks them too)")
	fs.DurationVar(&o.LedgerCheckpointInterval, "ledger-checkpoint-interval", session.DefaultCheckpointInterval, "sign a checkpoint of the ledger head this often when entries were appended since the last one (0: not by time); one is also signed at shutdown and by every export")
}

// validate refuses flag values the daemon cannot start with, before
// anything is opened.
func (o *options) validate() error {
	if err := o.Connections.check(); err != nil {
		return err
	}
	if o.MaxJudgeRecords < 0 {
		return fmt.Errorf("--max-judge-records %d: give 0 (no bound) or a positive count (the default is %d)", o.MaxJudgeRecords, judge.DefaultMaxRecords)
	}
	hosts, err := httpapi.ParseHosts(o.HTTPAllowedHosts)
	if err != nil {
		return err
	}
	o.allowedHosts = hosts
	return nil
}
