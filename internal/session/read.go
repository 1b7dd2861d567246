package session

import (
	"context"
	"hash"
	"sync"

	"github.com/verifierd/verifierd/internal/compact"
	"github.com/verifierd/verifierd/internal/metrics"
	"github.com/verifierd/verifierd/internal/pluginhost"
	"github.com/verifierd/verifierd/judge"
	"github.com/verifierd/verifierd/receipt"
	"github.com/verifierd/verifierd/sdk"
)

// read is one read of a system of record in compact form (judge.Batch),
// as the session judges it. The map form is made only for the paths that
// need it (a keyed baseline's restoration, redaction of adapter text), at
// most once, on first use. A read streamed under a judge.Projection holds
// only what its group's contracts read (group.projection); its digest was
// taken from the whole records as they streamed.
type read struct {
	snap   judge.BatchSnapshot
	digest *receipt.ReadDigest // taken as the read streamed

	once sync.Once
	maps []judge.Record
}

func unreachableRead(reason string) *read {
	return &read{snap: judge.BatchSnapshot{Reachable: false, Reason: reason}}
}

// incompleteRead is a read the system of record answered but that is not
// whole: unreachable, with the adapter's code (sdk.CodeReadIncomplete, ...).
func incompleteRead(reason, code string) *read {
	return &read{snap: judge.BatchSnapshot{Reachable: false, Reason: reason, Code: code}}
}

// reachable reports whether the read succeeded.
func (r *read) reachable() bool { return r != nil && r.snap.Reachable }

// len is the number of records.
func (r *read) len() int {
	if r == nil {
		return 0
	}
	return r.snap.Batch.Len()
}

// projected reports whether the read was kept in part.
func (r *read) projected() bool { return r != nil && compact.Projected(r.snap.Batch) }

// records returns the map form, made once. A projected read's records are
// not whole: its map form is never made (group.projection keeps every
// read whole where the map form is used).
func (r *read) records() []judge.Record {
	if r == nil || r.snap.Batch == nil {
		return nil
	}
	r.once.Do(func() {
		b := r.snap.Batch
		r.maps = make([]judge.Record, b.Len())
		for i := range r.maps {
			r.maps[i] = b.Record(i)
		}
	})
	return r.maps
}

// snapshot returns the read in map form.
func (r *read) snapshot() judge.Snapshot {
	if r == nil {
		return judge.Snapshot{}
	}
	s := judge.Snapshot{Reachable: r.snap.Reachable, Reason: r.snap.Reason, Code: r.snap.Code}
	if r.snap.Reachable {
		s.Records = r.records()
	}
	return s
}

// readAfterRead reads the pinned adapter once into compact form. Every
// failure, transport or protocol, is an unreachable read: never a partial
// read set. A record that is not one JSON object (a syntax error, a
// duplicate key) makes the read unreachable with a reason naming its path.
// expect is the number of records expected (the baseline's), 0 if unknown;
// p, when not nil, is what of each record to keep (judge.Projection).
func (m *Manager) readAfterRead(ctx context.Context, inst *pluginhost.Instance, req sdk.CaptureRequest, expect int, p *judge.Projection) (*read, error) {
	return afterReader{keys: m.keys, metrics: m.metrics}.capture(ctx, inst, req, expect, p)
}

// afterReader takes after reads: it digests each record under the
// evidence keys as it streams and counts the read in metrics (nil: none).
type afterReader struct {
	keys    evidenceKeys
	metrics *metrics.Metrics
}

// capture is readAfterRead.
func (a afterReader) capture(ctx context.Context, inst *pluginhost.Instance, req sdk.CaptureRequest, expect int, p *judge.Projection) (*read, error) {
	capt, err := inst.CaptureAfter(ctx, req)
	if err != nil {
		return unreachableRead(err.Error()), err
	}
	defer capt.Close()
	if !capt.Reachable {
		reason := capt.Reason
		if reason == "" {
			reason = "unreachable"
		}
		return incompleteRead(reason, capt.Code), nil
	}
	rs := a.keys.newReadStream("the after read's records", expect, p)
	for batch, err := range capt.RawBatches() {
		if err != nil {
			return unreachableRead(err.Error()), err
		}
		for _, raw := range batch {
			if err := rs.Add(raw); err != nil {
				return unreachableRead("the adapter sent a record that is not one JSON object: " + err.Error()), nil
			}
		}
	}
	a.metrics.Captured(inst.Kind(), "after", rs.Len(), compact.Bytes(rs.RecordStream))
	return rs.read(), nil
}

// snapshot reads the adapter once into a snapshot, whole. Every failure,
// transport or protocol, is an unreachable read, never a partial read
// set; the error is that failure.
func (a afterReader) snapshot(ctx context.Context, inst *pluginhost.Instance, req sdk.CaptureRequest) (judge.Snapshot, error) {
	r, err := a.capture(ctx, inst, req, 0, nil)
	s := r.snapshot()
	if len(s.Records) == 0 {
		s.Records = nil // as the map path left an empty read
	}
	return s, err
}

// readStream decodes a read as it streams (judge.RecordStream), digesting
// every record whole before a projection drops any part of it.
type readStream struct {
	*judge.RecordStream
	mac hash.Hash
}

func (e evidenceKeys) newReadStream(path string, expect int, p *judge.Projection) readStream {
	rs := readStream{RecordStream: judge.NewRecordStream(path, expect), mac: judge.NewKeyedHash(e.key())}
	rs.Digest(rs.mac)
	rs.Project(p)
	return rs
}

// read is the reachable read streamed, with its digest.
func (rs readStream) read() *read {
	d := receipt.ReadDigest{Reachable: true, Records: rs.Len(), Digest: judge.KeyedSum(rs.mac)}
	return &read{snap: judge.BatchSnapshot{Reachable: true, Batch: rs.Batch()}, digest: &d}
}

// readDigestOf is readDigest of a compact read: the same digest. A
// streamed read has it already.
func (e evidenceKeys) readDigestOf(r *read) receipt.ReadDigest {
	if !r.reachable() {
		return receipt.ReadDigest{}
	}
	if r.digest != nil {
		return *r.digest
	}
	mac := judge.NewKeyedHash(e.key())
	b := r.snap.Batch
	n := b.Len()
	canon := compact.NewCanonicaliser(b)
	var buf []byte
	for i := range n {
		buf = append(canon.Append(buf[:0], i), '\n')
		mac.Write(buf)
	}
	return receipt.ReadDigest{Reachable: true, Records: n, Digest: judge.KeyedSum(mac)}
}
