// Package changes reads the write set of a verification (docs/adapters/sql.md,
// "The write set"): every committed row change to a candidate's declared
// tables between Begin and a Verify poll, from the database's own change
// log. The daemon reads it itself, in process: an adapter plugin never
// reports a write set, so the trust model is the judge's alone.
//
// A Source is one change log. Position reads where the log is now; Read
// returns every committed change between two positions. PostgreSQL logical
// decoding (pgoutput, a slot and publication the daemon owns per
// deployment) is the one source today; a MariaDB/MySQL row-binlog source
// fits the same interface (positions are then file:offset or a GTID set,
// kept as opaque text).
package changes

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/verifierd/verifierd/judge"
)

// Position is a log position as its source writes it (PostgreSQL: an LSN,
// "0/16B3748"). Only its source compares positions.
type Position string

// Source is one change log.
type Source interface {
	// Position is the log's position now: every change committed before
	// the call is before it.
	Position(ctx context.Context) (Position, error)
	// Read returns every committed change to the source's tables whose
	// commit is at or after from and before upTo, in commit order. A
	// change log that no longer holds from (discarded), a slot that is
	// gone, or a change without row images is a write set that is not
	// Complete (or not Reachable), never an error the caller must guess
	// about; err is only for a canceled ctx.
	Read(ctx context.Context, from, upTo Position) (ws judge.WriteSet, err error)
}

// deploymentNameRE is a deployment name the slot and publication can
// carry: PostgreSQL's slot names are lower-case letters, digits and '_'
// (a '-' of the name becomes '_').
var deploymentNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,39}$`)

// Names are the slot and publication the daemon owns for one deployment.
type Names struct {
	Slot, Publication string
}

// NamesFor returns the slot and publication of deployment, or an error
// naming the fix for a name they cannot carry.
func NamesFor(deployment string) (Names, error) {
	if !deploymentNameRE.MatchString(deployment) {
		return Names{}, fmt.Errorf("deployment name %q: write 1 to 40 lower-case letters, digits, '_' or '-', starting with a letter (it names the replication slot verifierd_<name>; rename the deployment under deployments: in the daemon config)", deployment)
	}
	name := "verifierd_" + strings.ReplaceAll(deployment, "-", "_")
	return Names{Slot: name, Publication: name}, nil
}

// Holds are the Begin positions of the open sessions of one source, by
// hold key (session id and capture): the slot may be advanced only to the
// oldest of them, so that no open session's changes are discarded. The
// daemon keeps them in its session store (every replica reads and writes
// the same holds, and they outlive a restart); the value is their JSON.
type Holds map[string]Hold

// Hold is one open session's Begin position and when it was taken.
type Hold struct {
	From Position  `json:"from"`
	At   time.Time `json:"at"`
}

// Oldest is the oldest held position, positions compared with less; ok is
// false when none is held.
func (h Holds) Oldest(less func(a, b Position) bool) (p Position, ok bool) {
	if len(h) == 0 {
		return "", false
	}
	all := make([]Position, 0, len(h))
	for _, q := range h {
		all = append(all, q.From)
	}
	return slices.MinFunc(all, func(a, b Position) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	}), true
}

// ReleasePrefix forgets every hold whose key starts with prefix (the
// captures of one session) and reports whether there was any.
func (h Holds) ReleasePrefix(prefix string) bool {
	released := false
	for k := range h {
		if strings.HasPrefix(k, prefix) {
			delete(h, k)
			released = true
		}
	}
	return released
}
