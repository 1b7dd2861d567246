package email

import (
	"bufio"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/text/encoding/htmlindex"
)

// Limits on what one message may cost to read.
const (
	// maxMessageBytes is read of a message file; what follows is ignored
	// (a body probe then sees only the text before it).
	maxMessageBytes = 64 << 20
	// maxTextBytes is the decoded text, all parts together, the body probe
	// runs over.
	maxTextBytes = 16 << 20
	// maxDepth bounds multipart nesting.
	maxDepth = 16
)

// recipientHeaders are read for `to`: the visible recipients, Bcc when a
// copy kept it, and the envelope recipients a delivery agent records.
var recipientHeaders = []string{"To", "Cc", "Bcc", "Delivered-To", "X-Original-To", "Envelope-To"}

// message is what the adapter reads from one message file. Header fields
// that are absent stay unset (has*).
type message struct {
	recipients []string // normalised addr-specs, sorted, unique
	from       string
	hasFrom    bool
	subject    string
	hasSubject bool
	messageID  string
	date       time.Time // zero when absent or unreadable
	bodyMatch  bool
}

// readMessage parses one message. A message the parser cannot read at all
// (no header block) is an error; a body that is malformed further down
// gives up quietly, so a probe reports no match rather than a guess. A
// read error of r itself is returned, never taken for the end of the
// message.
func readMessage(r io.Reader, probe *regexp.Regexp) (*message, error) {
	src := &stickyErr{r: io.LimitReader(r, maxMessageBytes)}
	msg, err := mail.ReadMessage(bufio.NewReader(src))
	if src.err != nil {
		return nil, src.err
	}
	if err != nil {
		return nil, err
	}
	m := &message{}
	dec := &mime.WordDecoder{CharsetReader: charsetReader}

	var all []string
	for _, h := range recipientHeaders {
		for _, v := range msg.Header[h] {
			all = append(all, addresses(v, dec)...)
		}
	}
	slices.Sort(all)
	m.recipients = slices.Compact(all)

	if vs, ok := msg.Header["From"]; ok && len(vs) > 0 {
		if from := addresses(vs[0], dec); len(from) > 0 {
			m.from, m.hasFrom = from[0], true
		}
	}
	if vs, ok := msg.Header["Subject"]; ok && len(vs) > 0 {
		m.hasSubject = true
		m.subject = vs[0]
		if d, err := dec.DecodeHeader(vs[0]); err == nil {
			m.subject = d
		}
	}
	m.messageID = strings.TrimSpace(msg.Header.Get("Message-Id"))
	if d, err := msg.Header.Date(); err == nil {
		m.date = d.UTC()
	}

	if probe != nil {
		t := &texts{probe: probe, budget: maxTextBytes}
		t.part(textproto.MIMEHeader(msg.Header), msg.Body, 0)
		m.bodyMatch = t.matched
		// Read what the parts left, so a read error at the end of the file
		// is still seen.
		_, _ = io.Copy(io.Discard, msg.Body)
	}
	if src.err != nil {
		return nil, src.err
	}
	return m, nil
}

// addresses reads an address-list header as lowercased addr-specs. A part
// the parser refuses is kept as its trimmed, lowercased text: a malformed
// recipient is still a recipient, and dropping it could hide a leak.
func addresses(v string, dec *mime.WordDecoder) []string {
	p := mail.AddressParser{WordDecoder: dec}
	if list, err := p.ParseList(v); err == nil {
		out := make([]string, 0, len(list))
		for _, a := range list {
			out = append(out, strings.ToLower(a.Address))
		}
		return out
	}
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		if a, err := p.Parse(part); err == nil {
			out = append(out, strings.ToLower(a.Address))
		} else if s := strings.ToLower(strings.TrimSpace(part)); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// texts runs the probe over the decoded text parts of a message.
type texts struct {
	probe   *regexp.Regexp
	budget  int64
	matched bool
}

// part reads one MIME entity: a multipart is walked, a text/plain or
// text/html part that is not an attachment is decoded (transfer encoding,
// then charset) and probed, anything else is skipped.
func (t *texts) part(h textproto.MIMEHeader, body io.Reader, depth int) {
	if t.matched || t.budget <= 0 {
		return
	}
	media, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		// No or an unreadable Content-Type is plain US-ASCII text
		// (RFC 2045, section 5.2).
		media, params = "text/plain", nil
	}
	if disp, _, err := mime.ParseMediaType(h.Get("Content-Disposition")); err == nil && disp == "attachment" {
		return
	}
	switch {
	case strings.HasPrefix(media, "multipart/"):
		if depth >= maxDepth || params["boundary"] == "" {
			return
		}
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return
			}
			t.part(p.Header, p, depth+1)
			if t.matched {
				return
			}
		}
	case media == "text/plain" || media == "text/html":
		r := charsetDecode(params["charset"], transferDecode(h.Get("Content-Transfer-Encoding"), body))
		text, _ := io.ReadAll(io.LimitReader(r, t.budget))
		t.budget -= int64(len(text))
		t.matched = t.probe.Match(text)
	}
}

// transferDecode undoes a Content-Transfer-Encoding; 7bit, 8bit, binary
// and unknown encodings pass through.
func transferDecode(cte string, r io.Reader) io.Reader {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "quoted-printable":
		return quotedprintable.NewReader(r)
	case "base64":
		return base64.NewDecoder(base64.StdEncoding, base64Only{r})
	}
	return r
}

// base64Only drops what is not base64 (line breaks, stray spaces), which a
// decoder must ignore (RFC 2045, section 6.8).
type base64Only struct{ r io.Reader }

func (b base64Only) Read(p []byte) (int, error) {
	for {
		n, err := b.r.Read(p)
		kept := 0
		for _, c := range p[:n] {
			if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=' {
				p[kept] = c
				kept++
			}
		}
		if kept > 0 || err != nil || n == 0 {
			return kept, err
		}
	}
}

// charsetDecode converts text in a declared charset to UTF-8. UTF-8,
// US-ASCII and charsets golang.org/x/text does not know pass through.
func charsetDecode(charset string, r io.Reader) io.Reader {
	switch strings.ToLower(strings.TrimSpace(charset)) {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
		return r
	}
	if dr, err := charsetReader(charset, r); err == nil {
		return dr
	}
	return r
}

// charsetReader is mime.WordDecoder's hook for charsets beyond UTF-8,
// ISO-8859-1 and US-ASCII.
func charsetReader(charset string, r io.Reader) (io.Reader, error) {
	enc, err := htmlindex.Get(charset)
	if err != nil {
		return nil, errors.New("unknown charset " + charset)
	}
	return enc.NewDecoder().Reader(r), nil
}

// stickyErr remembers the first read error other than io.EOF.
type stickyErr struct {
	r   io.Reader
	err error
}

func (s *stickyErr) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}
