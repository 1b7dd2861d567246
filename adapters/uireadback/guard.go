package uireadback

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// A read-back is read-only twice over. The page guard (pageGuardJS) is
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
	p := &policy{signInPost: originPath(s.signIn.url), readPosts: map[string]bool{}}
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
	switch strings.ToUpper(method) {
	case "GET", "HEAD", "OPTIONS":
		return true
	case "POST":
		target := originPath(rawURL)
		if target == "" {
			return false
		}
		if p.phase.Load() == phaseSignIn && target == p.signInPost {
			return true
		}
		return p.readPosts[target]
	}
	return false
}

// originPath is scheme://host/path of a URL, without query or fragment; ""
// when it does not parse as an absolute URL.
func originPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host) + path
}

// refusal is one request a guard stopped.
type refusal struct {
	layer  string // "page guard" or "network guard"
	how    string // fetch, xhr, beacon, form, websocket, ...
	method string
	target string // origin+path, never the query (it may carry data)
}

func (r refusal) String() string {
	t := r.target
	if t == "" {
		t = "(no URL)"
	}
	return fmt.Sprintf("%s %s via %s, refused by the %s", r.method, t, r.how, r.layer)
}

// refusals collects what the guards stopped during one read-back.
type refusals struct {
	mu   sync.Mutex
	list []refusal
}

func (rs *refusals) add(r refusal) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.list = append(rs.list, r)
}

func (rs *refusals) snapshot() []refusal {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]refusal(nil), rs.list...)
}

// pageReport is what the page guard sends through its binding.
type pageReport struct {
	How    string `json:"how"`
	Method string `json:"method"`
	URL    string `json:"url"`
}

func parsePageReport(payload string) refusal {
	var pr pageReport
	if json.Unmarshal([]byte(payload), &pr) != nil {
		// Anything else calling the binding is itself suspicious: keep it.
		return refusal{layer: "page guard", how: "an unrecognised report", method: "?"}
	}
	return refusal{layer: "page guard", how: pr.How, method: strings.ToUpper(pr.Method), target: originPath(pr.URL)}
}

// pageGuardJS is the page guard for one phase: binding is the name of the
// Runtime binding it reports refusals through; allowed the origin+path
// targets a POST may have. It keeps its own references to everything it
// uses, so a page script that replaces a built-in later cannot talk it into
// letting a request through.
func pageGuardJS(binding string, allowed []string) string {
	b, _ := json.Marshal(binding)
	a, _ := json.Marshal(allowed)
	return "(" + pageGuardSource + ")(" + string(b) + "," + string(a) + ");"
}

const pageGuardSource = `function (binding, allowedList) {
  "use strict";
  var w = window;
  var report = w[binding];
  try { delete w[binding]; } catch (e) {}
  var call = Function.prototype.call;
  var bind = call.bind(Function.prototype.bind);
  var apply = bind(call, Function.prototype.apply);
  var upper = bind(call, String.prototype.toUpperCase);
  var stringify = JSON.stringify;
  var URL_ = w.URL, S = String, TypeError_ = TypeError, Promise_ = Promise;
  var originOf = bind(call, Object.getOwnPropertyDescriptor(URL_.prototype, "origin").get);
  var pathOf = bind(call, Object.getOwnPropertyDescriptor(URL_.prototype, "pathname").get);
  var allowed = Object.create(null);
  for (var i = 0; i < allowedList.length; i++) { allowed[allowedList[i]] = true; }
  var READ = Object.create(null);
  READ.GET = true; READ.HEAD = true; READ.OPTIONS = true;

  function target(u) {
    try {
      var p = new URL_(S(u), document.baseURI);
      return originOf(p) + pathOf(p);
    } catch (e) { return ""; }
  }
  function ok(method, u) {
    var m = upper(S(method === undefined || method === null ? "GET" : method));
    if (READ[m] === true) { return true; }
    return m === "POST" && allowed[target(u)] === true;
  }
  var href = bind(call, Object.getOwnPropertyDescriptor(URL_.prototype, "href").get);
  function refuse(how, method, u) {
    var abs = S(u);
    try { abs = href(new URL_(abs, document.baseURI)); } catch (e) {}
    try { report(stringify({how: how, method: S(method), url: abs})); } catch (e) {}
  }
  var message = "verifierd read-back: a request that is not a read was refused";

  var fetch_ = w.fetch, Request_ = w.Request;
  if (fetch_) {
    var reqMethod = bind(call, Object.getOwnPropertyDescriptor(Request_.prototype, "method").get);
    var reqURL = bind(call, Object.getOwnPropertyDescriptor(Request_.prototype, "url").get);
    w.fetch = function (input, init) {
      var method = "GET", u = input;
      if (input instanceof Request_) { method = reqMethod(input); u = reqURL(input); }
      if (init && init.method !== undefined) { method = init.method; }
      if (!ok(method, u)) { refuse("fetch", method, u); return Promise_.reject(new TypeError_(message)); }
      return apply(fetch_, this, arguments);
    };
  }

  var XHR = w.XMLHttpRequest;
  if (XHR) {
    var open = XHR.prototype.open, send = XHR.prototype.send;
    var pending = new WeakMap(), wmGet = bind(call, WeakMap.prototype.get), wmSet = bind(call, WeakMap.prototype.set);
    XHR.prototype.open = function (method, u) {
      wmSet(pending, this, {method: method, url: u});
      return apply(open, this, arguments);
    };
    XHR.prototype.send = function () {
      var r = wmGet(pending, this) || {};
      if (!ok(r.method, r.url)) { refuse("xhr", r.method, r.url); throw new TypeError_(message); }
      return apply(send, this, arguments);
    };
  }

  var nav = w.navigator;
  if (nav && nav.sendBeacon) {
    var beacon = nav.sendBeacon;
    nav.sendBeacon = function (u) {
      if (!ok("POST", u)) { refuse("beacon", "POST", u); return false; }
      return apply(beacon, nav, arguments);
    };
  }

  var Form = w.HTMLFormElement;
  var formMethod = bind(call, Object.getOwnPropertyDescriptor(Form.prototype, "method").get);
  var formAction = bind(call, Object.getOwnPropertyDescriptor(Form.prototype, "action").get);
  var getAttr = bind(call, Element.prototype.getAttribute);
  var hasAttr = bind(call, Element.prototype.hasAttribute);
  var prevent = bind(call, Event.prototype.preventDefault);
  var stopNow = bind(call, Event.prototype.stopImmediatePropagation);
  function formRequest(form, submitter) {
    var m = formMethod(form), u = formAction(form);
    if (submitter && hasAttr(submitter, "formmethod")) { m = getAttr(submitter, "formmethod"); }
    if (submitter && hasAttr(submitter, "formaction")) { u = new URL_(getAttr(submitter, "formaction"), document.baseURI).href; }
    return {method: m, url: u};
  }
  w.addEventListener("submit", function (ev) {
    var r = formRequest(ev.target, ev.submitter);
    if (upper(S(r.method)) === "DIALOG") { return; }
    if (!ok(r.method, r.url)) { prevent(ev); stopNow(ev); refuse("form", r.method, r.url); }
  }, true);
  var submit = Form.prototype.submit;
  Form.prototype.submit = function () {
    var r = formRequest(this, null);
    if (upper(S(r.method)) !== "DIALOG" && !ok(r.method, r.url)) { refuse("form", r.method, r.url); return; }
    return apply(submit, this, arguments);
  };

  function block(name, how, method) {
    if (!(name in w)) { return; }
    w[name] = function (u) { refuse(how, method, u); throw new TypeError_(message); };
  }
  block("WebSocket", "websocket", "CONNECT");
  block("SharedWorker", "shared worker", "WORKER");
  block("RTCPeerConnection", "webrtc", "CONNECT");
  block("WebTransport", "webtransport", "CONNECT");
  w.open = function (u) { refuse("window.open", "OPEN", u); return null; };
  if (nav && nav.serviceWorker) {
    try {
      Object.defineProperty(nav.serviceWorker, "register", {value: function (u) {
        refuse("service worker", "REGISTER", u);
        return Promise_.reject(new TypeError_(message));
      }});
    } catch (e) {}
  }
}`
