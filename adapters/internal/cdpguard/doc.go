// Package cdpguard holds the read-only guards shared by the adapters that
// read a page through the Chrome DevTools protocol (ui_readback, onscreen):
// the page guard script, installed in every document before any page script
// runs, that refuses requests which are not reads before they are sent; the
// network guard (Network), which pauses every request and answers it, and
// the method rule it applies; and the record of what either guard refused. Any refusal makes a read unusable:
// a page that tried to write while being read is not a clean read. It also
// holds what both adapters do around one read of a page: its deadline
// (ReadDeadline) and the capture it answers (Capture).
package cdpguard
