package email

import (
	"bytes"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// crlf turns a readable message literal into wire form.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

func TestReadMessage(t *testing.T) {
	t.Parallel()
	probe := regexp.MustCompile(`Invoice 42 — 100,00 €`)
	tests := []struct {
		name string
		raw  string
		want message
	}{
		{
			name: "plain text, every recipient header",
			raw: `From: "Billing" <Billing@Shop.example>
To: Alice <ALICE@example.com>, bob@example.com
Cc: carol@example.com
Bcc: dave@example.com
Delivered-To: alice@example.com
X-Original-To: eve@example.com
Subject: plain
Message-ID: <m1@shop.example>
Date: Tue, 02 Jun 2026 10:20:30 +0200

Invoice 42 — 100,00 €
`,
			want: message{
				recipients: []string{"alice@example.com", "bob@example.com", "carol@example.com", "dave@example.com", "eve@example.com"},
				from:       "billing@shop.example", hasFrom: true,
				subject: "plain", hasSubject: true,
				messageID: "<m1@shop.example>",
				date:      time.Date(2026, 6, 2, 8, 20, 30, 0, time.UTC),
				bodyMatch: true,
			},
		},
		{
			name: "RFC 2047 subject, UTF-8 base64 and Latin-1 quoted-printable words",
			raw: `To: a@example.com
Subject: =?UTF-8?B?UmVjaG51bmcgTnIuIDQyIOKAkyBGw6RsbGln?= =?ISO-8859-1?Q?_f=FCr_J=FCrgen?=

nothing
`,
			want: message{recipients: []string{"a@example.com"}, subject: "Rechnung Nr. 42 – Fällig für Jürgen", hasSubject: true},
		},
		{
			name: "RFC 2047 subject in windows-1252 and an encoded display name",
			raw: `From: =?windows-1252?Q?Fran=E7oise_=96_Shop?= <f@shop.example>
To: =?UTF-8?Q?J=C3=BCrgen?= <j@example.com>
Subject: =?windows-1252?Q?=93quoted=94_=80?=

x
`,
			want: message{recipients: []string{"j@example.com"}, from: "f@shop.example", hasFrom: true, subject: "“quoted” €", hasSubject: true},
		},
		{
			name: "multipart/alternative: quoted-printable text and HTML",
			raw: `To: a@example.com
MIME-Version: 1.0
Content-Type: multipart/alternative; boundary="b1"

--b1
Content-Type: text/plain; charset=utf-8
Content-Transfer-Encoding: quoted-printable

Invoice 42 =E2=80=94 100,00 =E2=82=AC, due in=20
30 days; a soft line=
 break.
--b1
Content-Type: text/html; charset=utf-8

<p>Invoice 42</p>
--b1--
`,
			want: message{recipients: []string{"a@example.com"}, bodyMatch: true},
		},
		{
			name: "multipart/mixed: base64 text part with broken lines",
			raw: `To: a@example.com
Content-Type: multipart/mixed; boundary=outer

--outer
Content-Type: multipart/alternative; boundary=inner

--inner
Content-Type: text/plain; charset=UTF-8
Content-Transfer-Encoding: base64

SW52b2ljZSA0MiDigJQg
MTAwLDAwIOKCrA==
--inner--
--outer
Content-Type: application/pdf
Content-Transfer-Encoding: base64

JVBERi0xLjcK
--outer--
`,
			want: message{recipients: []string{"a@example.com"}, bodyMatch: true},
		},
		{
			name: "the probe's text only in an attachment does not count",
			raw: `To: a@example.com
Content-Type: multipart/mixed; boundary=m

--m
Content-Type: text/plain

see attachment
--m
Content-Type: text/plain; charset=utf-8
Content-Disposition: attachment; filename=invoice.txt

Invoice 42 — 100,00 €
--m--
`,
			want: message{recipients: []string{"a@example.com"}},
		},
		{
			name: "Latin-1 body converted before probing",
			raw:  "To: a@example.com\nContent-Type: text/plain; charset=iso-8859-15\nContent-Transfer-Encoding: 8bit\n\nInvoice 42 \x97 100,00 \xa4\n",
			// ISO-8859-15 has no em dash at 0x97, so only the euro sign
			// converts; the probe wants both.
			want: message{recipients: []string{"a@example.com"}},
		},
		{
			name: "windows-1252 body converted before probing",
			raw:  "To: a@example.com\nContent-Type: text/plain; charset=windows-1252\n\nInvoice 42 \x97 100,00 \x80\n",
			want: message{recipients: []string{"a@example.com"}, bodyMatch: true},
		},
		{
			name: "an unparseable recipient is kept, not dropped",
			raw: `To: alice@example.com, "unterminated <eve@evil.example
Subject: s

x
`,
			want: message{recipients: []string{"\"unterminated <eve@evil.example", "alice@example.com"}, subject: "s", hasSubject: true},
		},
		{
			name: "group syntax and repeated Delivered-To",
			raw: `To: undisclosed-recipients:;
Delivered-To: b@example.com
Delivered-To: a@example.com
Delivered-To: B@Example.com

x
`,
			want: message{recipients: []string{"a@example.com", "b@example.com"}},
		},
		{
			name: "no headers of interest",
			raw:  "X-Other: 1\n\nbody\n",
			want: message{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := readMessage(strings.NewReader(crlf(tt.raw)), probe)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, *got, cmp.AllowUnexported(message{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadMessageRefusesNoHeader(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"", "not a header line\r\n\r\nbody", "\x00\x01\x02"} {
		if m, err := readMessage(strings.NewReader(raw), nil); err == nil {
			t.Errorf("readMessage(%q) = %+v; want an error", raw, m)
		}
	}
}

type failingReader struct{ after int }

var errDisk = errors.New("disk read failed")

func (f *failingReader) Read(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errDisk
	}
	n := min(len(p), f.after)
	for i := range n {
		p[i] = 'x'
	}
	copy(p, "To: a@example.com\r\n\r\n")
	f.after -= n
	return n, nil
}

// A read error in the body is the disk's, and must not pass for the end of
// a message whose probe did not match.
func TestReadMessageKeepsReadErrors(t *testing.T) {
	t.Parallel()
	_, err := readMessage(&failingReader{after: 4096}, regexp.MustCompile("never"))
	if !errors.Is(err, errDisk) {
		t.Errorf("err = %v; want the read error", err)
	}
}

// FuzzReadMessage: the MIME reader never panics, terminates, is
// deterministic, and its recipients are lowercased, sorted and unique.
func FuzzReadMessage(f *testing.F) {
	seeds := []string{
		"To: a@example.com\r\nSubject: =?UTF-8?B?w6Q=?=\r\n\r\nhello",
		"To: a@example.com\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Type: text/plain\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nInvoice=2042\r\n--x--\r\n",
		"Content-Type: multipart/alternative; boundary=\"a\"\r\n\r\n--a\r\nContent-Type: multipart/related; boundary=b\r\n\r\n--b\r\nContent-Transfer-Encoding: base64\r\n\r\nSW52b2ljZSA0Mg==\r\n--b--\r\n--a--\r\n",
		"From: =?x-unknown?Q?a?= <a@b>\r\nCc: \"q,\" <c@d>, broken <\r\nDate: Mon, 1 Jan 2001 00:00:00 +0000\r\n\r\n",
		"Content-Type: text/plain; charset=shift_jis\r\n\r\n\x82\xa0",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	probe := regexp.MustCompile(`Invoice ?42`)
	f.Fuzz(func(t *testing.T, raw []byte) {
		m1, err1 := readMessage(bytes.NewReader(raw), probe)
		m2, err2 := readMessage(bytes.NewReader(raw), probe)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("not deterministic: %v / %v", err1, err2)
		}
		if err1 != nil {
			return
		}
		if !cmp.Equal(m1, m2, cmp.AllowUnexported(message{})) {
			t.Fatalf("not deterministic: %+v / %+v", m1, m2)
		}
		if !slices.IsSorted(m1.recipients) || len(slices.Compact(slices.Clone(m1.recipients))) != len(m1.recipients) {
			t.Errorf("recipients not sorted and unique: %q", m1.recipients)
		}
		for _, r := range m1.recipients {
			if r == "" || r != strings.ToLower(r) {
				t.Errorf("recipient %q is empty or not lowercased", r)
			}
		}
		if m1.from != strings.ToLower(m1.from) {
			t.Errorf("from %q not lowercased", m1.from)
		}
	})
}
