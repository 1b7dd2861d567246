package uireadback

import (
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/verifierd/verifierd/adapters/internal/cdpguard"
)

// A read-back is read-only twice over. The page guard (cdpguard.PageGuardJS) is
// installed in every document and frame before any page script runs and
// refuses, before they are sent, fetch, XHR, beacon and form requests that
// are not reads, plus the channels the network guard cannot see (WebSocket,
// shared and service workers, WebRTC, WebTransport, popups). The network
// guard (policy.allows, driven by the Fetch domain) pauses every request the
// page makes and aborts every one whose method is not GET, HEAD or OPTIONS.
// Each refusal is recorded, and any refusal makes the read unusable: a page
// that tried to write is not a page whose contents can be trusted as a plain
// read.
//
// Two writes are allowed: a POST to sign_in.url while signing in (and only
// until the signed-in element appears), and POSTs to read_post_paths (read
// endpoints that use POST, such as a GraphQL query).

// phases of a read-back.
const (
	phaseSignIn int32 = iota
	phaseRead
)

// policy decides which requests may pass.
type policy struct {
	phase      atomic.Int32
	signInPost string          // origin+path of sign_in.url
	readPosts  map[string]bool // origin+path of each read_post_paths entry
}

func newPolicy(s *settings) *policy {
	p := &policy{signInPost: cdpguard.OriginPath(s.signIn.url), readPosts: map[string]bool{}}
	for _, rp := range s.readPostPaths {
		p.readPosts[rp] = true
	}
	return p
}

// allowedPosts are the origin+path targets a POST may have in the current
// phase.
func (p *policy) allowedPosts() []string {
	out := make([]string, 0, len(p.readPosts)+1)
	if p.phase.Load() == phaseSignIn {
		out = append(out, p.signInPost)
	}
	out = append(out, slices.Sorted(maps.Keys(p.readPosts))...)
	return out
}

// allows reports whether a request may go out.
func (p *policy) allows(method, rawURL string) bool {
	if cdpguard.IsRead(method) {
		return true
	}
	// Only a POST to a declared read or sign-in target; nothing else.
	if !strings.EqualFold(method, "POST") {
		return false
	}
	target := cdpguard.OriginPath(rawURL)
	if target == "" {
		return false
	}
	if p.phase.Load() == phaseSignIn && target == p.signInPost {
		return true
	}
	return p.readPosts[target]
}
