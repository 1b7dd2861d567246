package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// connectionFlagNames are the client flags (clientFlags.register), which may
// stand before the command as well as after it.
const connectionFlagNames = "--addr, --token-env, --tls-ca, --timeout, --insecure"

// offlineCommands need no daemon, so they take no connection flags.
var offlineCommands = map[string]bool{"judge": true, "bind": true, "audit-tables": true, "receipt": true, "help": true}

// leadingClientFlags moves the connection flags written before the command
// to just after the command (after its subcommand, for those that have one),
// so `verifyctl --addr X begin ...` runs exactly as `verifyctl begin --addr X
// ...`; a flag given again after the command wins, as a later flag does.
// Anything but a connection flag before the command is refused, and so are
// connection flags before a command that talks to no daemon. It reports false
// after printing the refusal.
func leadingClientFlags(args []string, stderr io.Writer) ([]string, bool) {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return args, true
	}
	switch args[0] {
	case "-h", "-help", "--help":
		return args, true
	}
	fs := flag.NewFlagSet("verifyctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cf clientFlags
	cf.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, usage)
			return nil, false
		}
		usageError(stderr, "%v; before the command only the connection flags (%s) may stand: write the command's own flags after it", err, connectionFlagNames)
		return nil, false
	}
	rest := fs.Args()
	if len(rest) == 0 {
		usageError(stderr, "the connection flags need a command after them\n%s", usage)
		return nil, false
	}
	var lead []string
	fs.Visit(func(f *flag.Flag) { lead = append(lead, "--"+f.Name+"="+f.Value.String()) })
	cmd := rest[0]
	words := 1
	switch {
	case cmd == "ledger":
		if len(rest) < 2 || rest[1] != "export" {
			usageError(stderr, "ledger verify checks an exported ledger offline and takes no connection flags; only ledger export talks to a daemon")
			return nil, false
		}
		words = 2
	case cmd == "artifact" || cmd == "episode" || cmd == "reward" || cmd == "run":
		if len(rest) < 2 || strings.HasPrefix(rest[1], "-") {
			return rest, true // the command names its subcommands
		}
		words = 2
	case offlineCommands[cmd]:
		usageError(stderr, "%s works without a daemon and takes no connection flags; drop %s", cmd, strings.Join(lead, " "))
		return nil, false
	}
	out := make([]string, 0, len(rest)+len(lead))
	out = append(out, rest[:words]...)
	out = append(out, lead...)
	return append(out, rest[words:]...), true
}
