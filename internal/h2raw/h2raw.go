// Package h2raw is a gRPC client written frame by frame over HTTP/2, for
// tests that play a client no gRPC library would be: one that opens a
// call, sends the start of its message and then trickles the rest, or
// stops. It speaks plaintext HTTP/2 (h2c) on a connection it is given,
// answers the server's SETTINGS and PINGs, and reports how each call it
// opened ended: the grpc-status of its trailers, or the RST_STREAM that
// reset it, or the connection's end.
package h2raw

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
)

// End is how a call ended.
type End struct {
	// Status is true when the server sent trailers with a grpc-status;
	// Code and Message are theirs.
	Status  bool
	Code    codes.Code
	Message string
	// Reset is the RST_STREAM code, when the stream was reset without
	// trailers first.
	Reset http2.ErrCode
	// Err is why the connection ended, when it ended before the call did.
	Err error
}

// Client is one HTTP/2 connection. Its methods may be called from several
// goroutines.
type Client struct {
	conn net.Conn
	mu   sync.Mutex // guards the writes and what follows
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32
	ends map[uint32]chan End
	done map[uint32]bool
}

// New starts HTTP/2 on conn: the client preface and an empty SETTINGS
// frame, then a goroutine that reads the server's frames until conn
// closes.
func New(conn net.Conn) (*Client, error) {
	c := &Client{conn: conn, next: 1, ends: map[uint32]chan End{}, done: map[uint32]bool{}}
	c.fr = http2.NewFramer(conn, conn)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		return nil, err
	}
	if err := c.fr.WriteSettings(); err != nil {
		return nil, err
	}
	go c.read()
	return c, nil
}

// Open starts a call of path (/package.Service/Method) with the request
// headers of a gRPC call plus md, and returns its stream id. Its message
// follows with Send.
func (c *Client) Open(authority, path string, md map[string]string) (uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hbuf.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", authority},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		if err := c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			return 0, err
		}
	}
	for k, v := range md {
		if err := c.enc.WriteField(hpack.HeaderField{Name: k, Value: v}); err != nil {
			return 0, err
		}
	}
	id := c.next
	c.next += 2
	c.ends[id] = make(chan End, 1)
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true})
	return id, err
}

// Send sends p on stream id as one DATA frame (at most 16 KiB), ending the
// stream when end is set.
func (c *Client) Send(id uint32, p []byte, end bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fr.WriteData(id, end, p)
}

// Prefix is a gRPC message's 5-byte prefix: uncompressed, n bytes.
func Prefix(n uint32) []byte {
	return []byte{0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
}

// Ended reports how stream id ended, once it has: its channel receives
// one End.
func (c *Client) Ended(id uint32) <-chan End {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ends[id]
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// read answers the server's SETTINGS and PINGs and delivers each call's
// end, until the connection ends (then every open call ends with Err).
func (c *Client) read() {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.endAll(err)
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.write(func() error { return c.fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.write(func() error { return c.fr.WritePing(true, f.Data) })
			}
		case *http2.MetaHeadersFrame:
			if e, ok := trailers(f); ok {
				c.end(f.StreamID, e)
			}
		case *http2.RSTStreamFrame:
			c.end(f.StreamID, End{Reset: f.ErrCode})
		case *http2.GoAwayFrame:
			if f.ErrCode != http2.ErrCodeNo {
				c.endAll(fmt.Errorf("GOAWAY %v", f.ErrCode))
			}
		}
	}
}

// trailers is the end a HEADERS frame carries, if it carries grpc-status.
func trailers(f *http2.MetaHeadersFrame) (End, bool) {
	code := ""
	e := End{}
	for _, h := range f.Fields {
		switch h.Name {
		case "grpc-status":
			code = h.Value
		case "grpc-message":
			e.Message, _ = url.PathUnescape(h.Value)
		}
	}
	if code == "" {
		return End{}, false
	}
	n, err := strconv.Atoi(code)
	if err != nil {
		return End{Err: fmt.Errorf("grpc-status %q", code)}, true
	}
	e.Status, e.Code = true, codes.Code(n)
	return e, true
}

func (c *Client) write(f func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = f()
}

// end delivers stream id's first end; later ones (the RST_STREAM after
// trailers) are dropped.
func (c *Client) end(id uint32, e End) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.ends[id]
	if !ok || c.done[id] {
		return
	}
	c.done[id] = true
	ch <- e
}

func (c *Client) endAll(err error) {
	if err == nil {
		err = errors.New("the connection ended")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, ch := range c.ends {
		if !c.done[id] {
			c.done[id] = true
			ch <- End{Err: err}
		}
	}
}
