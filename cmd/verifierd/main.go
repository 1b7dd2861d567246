// Command verifierd is the verification daemon: runtime clients call Begin
// before a consequential step and Verify after it, over gRPC; adapters run as
// plugin subprocesses; the daemon does all the judging.
//
//	verifierd --listen 127.0.0.1:7443 --data-dir DIR --plugin-dir DIR [--config FILE] [--http-listen ADDR] [--insecure]
//	          [--http-allowed-hosts HOST,...] [--max-connections N] [--handshake-timeout D] [--idle-timeout D]
//	          [--store postgres://USER@HOST:PORT/DB --store-password-env NAME] [--retain 168h]
//	          [--evidence-key FILE] [--signing-key FILE] [--rotate-keys]
//	verifierd store check|compact|salvage --data-dir DIR [--out DIR] [--evidence-key FILE]
//	verifierd store check|salvage --store postgres://… [--out postgres://…] [--evidence-key FILE]
//	verifierd --version
//
// SIGTERM or SIGINT drains in-flight calls, then stops the adapters. SIGUSR1
// runs a garbage collection and returns freed memory to the OS (for
// measuring resident memory, as the soak test does).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/verifierd/verifierd/internal/periodic"
	"github.com/verifierd/verifierd/internal/store"
	"github.com/verifierd/verifierd/internal/version"
)

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version") {
		fmt.Println("verifierd", version.Get())
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "store" {
		os.Exit(storeMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "verifierd:", err)
		os.Exit(1)
	}
}

// run parses the flags into options, builds the daemon from them and
// serves until a signal.
func run(args []string) error {
	o, err := parseOptions(args)
	if err != nil {
		return err
	}
	d, err := newDaemon(o)
	if err != nil {
		return err
	}
	defer d.close()
	return d.serve()
}

// orphanInterval is how often the daemon looks for orphans: every 10
// minutes, or more often for a retention shorter than 20 minutes.
func orphanInterval(retain time.Duration) time.Duration {
	if retain > 0 && retain/2 < 10*time.Minute {
		return max(retain/2, time.Second)
	}
	return 10 * time.Minute
}

// removeOrphansEvery runs the store's orphan cleanup off the request path
// until ctx ends; each run works in small transactions.
func removeOrphansEvery(ctx context.Context, st store.Backend, every, retain, retainFinished time.Duration, logger hclog.Logger) {
	periodic.Every(ctx, every, func(ctx context.Context) {
		stats, err := st.RemoveOrphans(ctx, time.Now(), retain)
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Error("store: removing orphans", "error", err)
		case stats != (store.Stats{}):
			logger.Info("store: removed orphans", "orphan_baselines", stats.OrphanBaselines, "unfinished_sessions", stats.UnfinishedSessions)
		}
		removeExpired(ctx, st, retainFinished, logger)
	})
}

// shortest is the shorter of two retentions, a zero (keep) one not
// counting.
func shortest(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// onFlags sees the daemon's flag set once every flag is registered (tests
// read it; see deploy/kubernetes).
var onFlags = func(*flag.FlagSet) {}

// shutdownCheckpointTimeout bounds signing and storing the ledger
// checkpoint at shutdown.
const shutdownCheckpointTimeout = 30 * time.Second

// freeMemory answers SIGUSR1: a forced GC that returns freed pages to the
// OS, so that resident memory shows what is really held.
func freeMemory(logger hclog.Logger) {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	logger.Info("freed memory on SIGUSR1", "heap_alloc_bytes", ms.HeapAlloc, "heap_sys_bytes", ms.HeapSys, "goroutines", runtime.NumGoroutine())
}
