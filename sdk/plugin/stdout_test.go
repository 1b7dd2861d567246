package plugin

import (
	"bytes"
	"strings"
	"testing"
)

type closeRecorder struct {
	bytes.Buffer
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestForwardStdout(t *testing.T) {
	t.Parallel()
	const handshake = "1|2|unix|/tmp/plugin123|grpc|CERT\n"
	tests := []struct {
		name      string
		written   string
		wantShake string
		wantRest  string
	}{
		{"only the handshake", handshake, handshake, ""},
		{"lines before and after", "hello\n" + handshake + "late\n", handshake, "hello\nlate\n"},
		{"partial line glued to the handshake", "no newline" + handshake, handshake, "no newline\n"},
		{"digits glued to the handshake", "count=5" + handshake, handshake, "count=5\n"},
		{"a later handshake-looking line is not forwarded", handshake + handshake, handshake, handshake},
		{"no handshake at all", "just noise\n", "", "just noise\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var shake closeRecorder
			var rest bytes.Buffer
			forwardStdout(strings.NewReader(tc.written), &shake, &rest)
			if shake.String() != tc.wantShake {
				t.Errorf("handshake stream = %q; want %q", shake.String(), tc.wantShake)
			}
			if rest.String() != tc.wantRest {
				t.Errorf("stderr = %q; want %q", rest.String(), tc.wantRest)
			}
			if shake.closed != (tc.wantShake != "") {
				t.Errorf("handshake stream closed = %v", shake.closed)
			}
		})
	}
}
