package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/verifierd/verifierd/internal/inflight"
)

// bodyChunk is how much of a body is drawn from the budget, and read, at
// a time: a body holds at most this much more than it has sent.
const bodyChunk = 64 << 10

// BodyLimits are how fast a request body must arrive (SetBodyLimits). A
// body that falls behind MinRate bytes a second, after Grace, is cut with
// 408; no body read outlasts ReadTimeout from the start of its reading
// (the server's --http-read-timeout). MinRate 0 cuts nothing.
type BodyLimits struct {
	MinRate     int64
	Grace       time.Duration
	ReadTimeout time.Duration
}

// SetBodyLimits sets the minimum transfer rate of request bodies
// (--min-body-rate). Call it before serving.
func (a *API) SetBodyLimits(l BodyLimits) { a.bodyLimits = l }

// bodyRefusal is why a body was not read whole: the HTTP status and the
// {error, detail} to answer with, or nothing to answer (the client left).
type bodyRefusal struct {
	code         int
	name, detail string
}

// readBody reads an authenticated request's body whole, at most maxBody
// bytes, drawing each chunk from the budget before reading it (never the
// declared length up front) and cutting a body that arrives slower than
// the limits allow. The hold it returns covers the body's bytes until the
// caller releases it. A refusal has been answered when it returns false.
func (a *API) readBody(w http.ResponseWriter, r *http.Request, maxBody int64) ([]byte, *inflight.Hold, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil, true
	}
	if r.ContentLength > maxBody {
		a.refuseBody(w, &bodyRefusal{http.StatusRequestEntityTooLarge, "request_too_large",
			fmt.Sprintf("%s takes a body of at most %d bytes; this one declares %d", r.URL.Path, maxBody, r.ContentLength)})
		return nil, nil, false
	}
	hold, err := a.budget.Hold(r.Context(), 0)
	if err != nil {
		a.refuseBody(w, budgetRefusal(err))
		return nil, nil, false
	}
	data, refusal := a.drawBody(w, r, hold, maxBody)
	if refusal != nil {
		hold.Release()
		a.refuseBody(w, refusal)
		return nil, nil, false
	}
	_ = hold.Resize(r.Context(), int64(len(data))) // shrinking never fails
	return data, hold, true
}

// drawBody is readBody's loop: a chunk drawn, a chunk read, the read
// deadline moved on by what arrived.
func (a *API) drawBody(w http.ResponseWriter, r *http.Request, hold *inflight.Hold, maxBody int64) ([]byte, *bodyRefusal) {
	rc := http.NewResponseController(w)
	start := time.Now()
	paced := a.bodyLimits.MinRate > 0
	defer func() {
		if paced {
			_ = rc.SetReadDeadline(time.Time{}) // the handler's time is not the body's
		}
	}()
	var buf bytes.Buffer
	chunk := make([]byte, bodyChunk)
	for {
		if err := hold.Resize(r.Context(), int64(buf.Len())+bodyChunk); err != nil {
			return nil, budgetRefusal(err)
		}
		if paced && rc.SetReadDeadline(a.bodyDeadline(start, int64(buf.Len()))) != nil {
			paced = false // a writer without deadlines (tests): no pacing
		}
		n, err := r.Body.Read(chunk)
		buf.Write(chunk[:n])
		if int64(buf.Len()) > maxBody {
			return nil, &bodyRefusal{http.StatusRequestEntityTooLarge, "request_too_large",
				fmt.Sprintf("%s takes a body of at most %d bytes", r.URL.Path, maxBody)}
		}
		switch {
		case err == io.EOF:
			return buf.Bytes(), nil
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, &bodyRefusal{http.StatusRequestTimeout, "body_too_slow", fmt.Sprintf(
				"the body arrived slower than %d bytes a second after the first %s (--min-body-rate); send it at once", a.bodyLimits.MinRate, a.bodyLimits.Grace)}
		case err != nil:
			return nil, &bodyRefusal{} // the client went away or broke the body
		}
	}
}

// bodyDeadline is when the bytes past received must have begun to arrive:
// Grace after start, plus the time received bytes take at MinRate, and
// never past ReadTimeout after start.
func (a *API) bodyDeadline(start time.Time, received int64) time.Time {
	l := a.bodyLimits
	d := start.Add(l.Grace + time.Duration(float64(received)/float64(l.MinRate)*float64(time.Second)))
	if last := start.Add(l.ReadTimeout); l.ReadTimeout > 0 && d.After(last) {
		d = last
	}
	return d
}

// budgetRefusal answers a budget that stayed spent with 429; a request
// whose client left while it waited gets no answer.
func budgetRefusal(err error) *bodyRefusal {
	if status.Code(err) != codes.ResourceExhausted {
		return &bodyRefusal{}
	}
	return &bodyRefusal{http.StatusTooManyRequests, "resource_exhausted", status.Convert(err).Message()}
}

// refuseBody answers a refused body and closes the connection: what is
// left of the body is not read.
func (a *API) refuseBody(w http.ResponseWriter, b *bodyRefusal) {
	if b.code == 0 {
		return
	}
	w.Header().Set("Connection", "close")
	if b.code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	WriteError(w, b.code, b.name, b.detail)
}

// inMemory is a request body already read whole (route): the layers that
// look at it before the gateway take its bytes without copying them.
type inMemory struct {
	*bytes.Reader
	data []byte
}

func (inMemory) Close() error { return nil }

// memBody is data as a request body.
func memBody(data []byte) io.ReadCloser { return inMemory{bytes.NewReader(data), data} }

// readAll is io.ReadAll of r's body, without a copy when the body is in
// memory and unread. The caller sets r.Body again before passing r on.
func readAll(r *http.Request) ([]byte, error) {
	if b, ok := r.Body.(inMemory); ok && b.Len() == len(b.data) {
		return b.data, nil
	}
	return io.ReadAll(r.Body)
}
