package e2e

import (
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/verifierd/verifierd/internal/h2raw"
	verifierv1 "github.com/verifierd/verifierd/proto/verifierd/verifier/v1"
)

// TestGRPCSlowMessageCut: with the token, four Begin calls on one raw
// HTTP/2 connection each declare a 16 MiB message and then trickle it a
// byte a second, far below the daemon's --min-body-rate of 1 MiB a second.
// While they hold their 16 MiB each of the request budget, honest gRPC and
// HTTP calls are answered; then each trickled call is cut with
// DeadlineExceeded naming --min-body-rate, and the budget is back to 0
// bytes in use.
func TestGRPCSlowMessageCut(t *testing.T) {
	httpAddr := freeAddr(t)
	d := startTokenDaemon(t, httpAddr, "--min-body-rate", "1048576")
	conn, err := net.DialTimeout("tcp", d.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, err := h2raw.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ids []uint32
	for range 4 {
		id, err := c.Open(d.addr, verifierv1.VerifierService_Begin_FullMethodName, map[string]string{"authorization": "Bearer " + starveToken})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Send(id, append(h2raw.Prefix(16<<20-1), 0x0a), false); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	waitFor(t, time.Minute, "four 16 MiB receive holds", func() bool { return inflightBytes(t, httpAddr) >= 4*16<<20 })
	honestCalls(t, d, httpAddr)
	ends := trickle(t, c, ids, 3*time.Minute)
	for i, end := range ends {
		if !end.Status || end.Code != codes.DeadlineExceeded || !strings.Contains(end.Message, "--min-body-rate") {
			t.Errorf("trickled Begin %d ended %+v, want trailers with DeadlineExceeded naming --min-body-rate", i, end)
		}
	}
	waitFor(t, time.Minute, "the request budget back to 0 bytes in use", func() bool { return inflightBytes(t, httpAddr) == 0 })
}

// trickle sends a byte a second on each of the streams ids until every one
// has ended, and returns how each ended; it fails the test after limit.
func trickle(t *testing.T, c *h2raw.Client, ids []uint32, limit time.Duration) []h2raw.End {
	t.Helper()
	giveUp := time.Now().Add(limit)
	ends := make([]h2raw.End, len(ids))
	ended := make([]bool, len(ids))
	for left := len(ids); left > 0; {
		time.Sleep(time.Second)
		if time.Now().After(giveUp) {
			t.Fatalf("%d trickled calls not ended after %v", left, limit)
		}
		for i, id := range ids {
			if ended[i] {
				continue
			}
			select {
			case ends[i] = <-c.Ended(id):
				ended[i] = true
				left--
			default:
				_ = c.Send(id, []byte{'x'}, false)
			}
		}
	}
	return ends
}
