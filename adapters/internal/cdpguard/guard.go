package cdpguard

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
)

// IsRead reports whether an HTTP method only reads: GET, HEAD or OPTIONS.
// The network guard lets these through and aborts every other method that
// a caller has not explicitly allowed.
func IsRead(method string) bool {
	switch strings.ToUpper(method) {
	case "GET", "HEAD", "OPTIONS":
		return true
	}
	return false
}

// NewBinding returns a fresh, unguessable name for the Runtime binding the
// page guard reports through, so that a page cannot find or fake it.
func NewBinding() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "__verifierdReadOnly_" + hex.EncodeToString(b)
}

// OriginPath is scheme://host/path of a URL, without query or fragment; ""
// when it does not parse as an absolute URL.
func OriginPath(raw string) string {
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

// Refusal is one request a guard stopped.
type Refusal struct {
	Layer  string // "page guard" or "network guard"
	How    string // fetch, xhr, beacon, form, websocket, ...
	Method string
	Target string // origin+path, never the query (it may carry data)
}

func (r Refusal) String() string {
	t := r.Target
	if t == "" {
		t = "(no URL)"
	}
	return fmt.Sprintf("%s %s via %s, refused by the %s", r.Method, t, r.How, r.Layer)
}

// Refusals collects what the guards stopped during one read.
type Refusals struct {
	mu   sync.Mutex
	list []Refusal
}

// Add records one refusal.
func (rs *Refusals) Add(r Refusal) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.list = append(rs.list, r)
}

// Summary names the first refusal and how many followed it ("" when
// there were none), for the reason of an unusable read.
func (rs *Refusals) Summary() string {
	list := rs.Snapshot()
	if len(list) == 0 {
		return ""
	}
	if len(list) > 1 {
		return fmt.Sprintf("%s (and %d more)", list[0], len(list)-1)
	}
	return list[0].String()
}

// Snapshot returns the refusals so far.
func (rs *Refusals) Snapshot() []Refusal {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]Refusal(nil), rs.list...)
}

// pageReport is what the page guard sends through its binding.
type pageReport struct {
	How    string `json:"how"`
	Method string `json:"method"`
	URL    string `json:"url"`
}

// ParsePageReport turns what the page guard sent through its binding into
// a Refusal.
func ParsePageReport(payload string) Refusal {
	var pr pageReport
	if json.Unmarshal([]byte(payload), &pr) != nil {
		// Anything else calling the binding is itself suspicious: keep it.
		return Refusal{Layer: "page guard", How: "an unrecognised report", Method: "?"}
	}
	return Refusal{Layer: "page guard", How: pr.How, Method: strings.ToUpper(pr.Method), Target: OriginPath(pr.URL)}
}

// PageGuardJS is the page guard: binding is the name of the
// Runtime binding it reports refusals through; allowed the origin+path
// targets a POST may have. It keeps its own references to everything it
// uses, so a page script that replaces a built-in later cannot talk it into
// letting a request through.
func PageGuardJS(binding string, allowed []string) string {
	if allowed == nil {
		// JSON null would stop the script at its first use of the list,
		// before it guards anything.
		allowed = []string{}
	}
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
  // A worker's requests do not pass through this guard, and the browser
  // does not hand every one of them to the network guard either (one
  // started as the read ended reached the application unseen): a page
  // that starts a worker cannot be read under the guards.
  block("Worker", "worker", "WORKER");
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
