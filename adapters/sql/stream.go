package sql

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/verifierd/verifierd/sdk"
)

// rowSource is one engine's open result set inside its read-only
// transaction. It is used by one goroutine at a time.
type rowSource interface {
	// next converts the next row; ok is false at the end of the rows or on
	// an error.
	next() (rec sdk.Record, ok bool, err error)
	// close releases the rows, ends the transaction and returns the
	// connection. It is called exactly once.
	close()
}

// stream turns a rowSource into a capture's records. The first row is read
// when the stream opens, so that an error the server only reports once it
// starts producing rows (a lock, a timeout, a missing table) makes the
// capture unreachable instead of a reachable read that then fails.
// The rows are converted one at a time as the SDK consumes them: a read of
// any size is never held whole.
type stream struct {
	src    rowSource
	ctx    context.Context
	cancel context.CancelFunc

	first    sdk.Record
	hasFirst bool

	mu    sync.Mutex
	state streamState
	// stop unregisters the hook that releases an abandoned stream.
	stop func() bool
}

type streamState int

const (
	streamOpen streamState = iota
	streamConsuming
	streamClosed
)

// openStream reads the first row of src. ctx bounds the whole read; cancel
// is called when the stream closes. On an error src is closed and the
// caller still owns cancel.
func openStream(ctx context.Context, cancel context.CancelFunc, src rowSource) (*stream, error) {
	s := &stream{src: src, ctx: ctx}
	rec, ok, err := src.next()
	if err != nil {
		src.close()
		return nil, err
	}
	s.first, s.hasFirst = rec, ok
	s.cancel = cancel
	// Nobody may ever consume the records (the daemon hung up before the
	// header was sent): when ctx ends, the hook releases a stream nobody
	// started reading. A stream being read is closed by its reader, which
	// sees the context end through the driver.
	s.stop = context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.state == streamOpen {
			s.state = streamClosed
			s.release(true)
		}
	})
	return s, nil
}

// release closes the rows. A stream abandoned before its end cancels its
// context first: the drivers then stop the query on the server (pgx sends
// a cancel request, the MySQL driver drops the connection) instead of
// reading the rest of a large result only to discard it.
func (s *stream) release(aborted bool) {
	if aborted {
		s.cancel()
		s.src.close()
		return
	}
	s.src.close()
	s.cancel()
}

// records yields the rows once, then closes the stream, on an error, or
// when the consumer stops early. An error after the first row aborts the
// capture; so does a context that ended, even if the driver made the rows
// look finished.
func (s *stream) records() sdk.RecordSource {
	return func(yield func(sdk.Record, error) bool) {
		s.mu.Lock()
		if s.state != streamOpen {
			s.mu.Unlock()
			yield(nil, errors.New("sql: a capture's records can be read once, before its deadline"))
			return
		}
		s.state = streamConsuming
		s.mu.Unlock()
		s.stop()
		finished := false
		defer func() {
			s.mu.Lock()
			s.state = streamClosed
			s.mu.Unlock()
			s.release(!finished)
		}()
		if s.hasFirst {
			first := s.first
			s.first = nil
			if !yield(first, nil) {
				return
			}
			for {
				rec, ok, err := s.src.next()
				if err != nil {
					// The header already said reachable; an error now
					// aborts the capture and the daemon discards every
					// record of it.
					yield(nil, fmt.Errorf("reading the query's rows: %w", err))
					return
				}
				if !ok {
					break
				}
				if !yield(rec, nil) {
					return
				}
			}
		}
		if err := s.ctx.Err(); err != nil {
			yield(nil, fmt.Errorf("reading the query's rows: %w", err))
			return
		}
		finished = true
	}
}
