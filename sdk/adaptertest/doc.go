// Package adaptertest is the qualification kit every verifierd adapter must
// pass, first-party and customer alike. The adapter's author supplies a
// Harness: hooks that put the real system of record into the states that
// fool naive verifiers (a write for the wrong entity, a double submit, a
// stale row, a write that lands late, wrong credentials, an outage before or
// after the action) and a way to run the adapter. Run then drives the adapter
// through the same plugin client the daemon uses (a go-plugin subprocess
// when the Harness names a binary, in process otherwise) and checks what the
// captures return.
//
// The kit checks capture behaviour only. It never decides a verdict: the
// daemon's judge does that from the captures, and it can only be right if
// the captures are true. So the kit asks: is every record the selector can
// see returned, duplicates included? Is a record for another entity kept out
// or told apart? Is an outage or a credential failure reported as
// unreachable (data), not as an error and not as an empty read? Does every
// capture read afresh? Does a plugin that dies mid-capture yield an error
// (host.ErrPluginShutdown) rather than a shorter read set? Does a record
// the adapter cannot shape fail the read rather than vanish from it? Is a
// bulk read that overran its deadline unreachable, never an empty or
// short read (the kit reads again with more time, and fails a successful
// empty read loudly as an adapter defect)?
//
// It also checks the protocol's instances: two configurations in one
// process, each read under its own id, and a released one gone.
//
// The adapter is configured as the daemon configures it: Harness.Deployment
// is a deployment document and an environment, which the kit resolves with
// the daemon's own code (sdk/unstable/deployment) into the section and the secret
// slots the adapter receives, so an adapter that reads its secret under a
// slot the daemon never sends fails here, not in production. Every run
// parameter is also replaced by nothing, an empty value, wildcards and
// injection-shaped values (HostileValues): none may widen the read. And
// the stale row's timestamp is read with the judge's own parser
// (sdk/unstable/timestamp), so a format the judge refuses fails the kit.
//
//	func TestQualification(t *testing.T) {
//		adaptertest.Run(t, adaptertest.Harness{Binary: bin, Deployment: ..., Params: ..., ...})
//	}
//
// The helpers every adapter's own tests need are here too: Subprocess
// starts the plugin binary as the daemon does, InProcess and Configured
// serve an adapter in process behind the daemon's client, and each returns
// an Instance (a configured instance with the run parameters every call
// carries; Setup also checks they bind, as the daemon does at Begin);
// Request builds a capture request, ReadAll reads one whole, and
// MainWithPlugin builds the plugin binary for TestMain.
package adaptertest
