package sdk

// Section is the shape of ConfigureRequest.Config for a plugin whose
// settings all sit under options:, the usual case:
//
//	effects:
//	  kind: ldap
//	  options: {base_dn: "dc=example,dc=org"}
//	  option_params: {uid: {param: user}}     # bound per session, merged into options
//	  secret_env: {password: LDAP_PASSWORD}   # req.Secret("password")
//
// reaches the adapter as {"kind": "ldap", "options": {"base_dn":
// "dc=example,dc=org", "uid": "jdoe"}}. An adapter built with Define takes
// it as its configure function's config type,
//
//	func configure(ctx context.Context, sec sdk.Section[options], req sdk.ConfigureRequest) (*settings, error)
//
// and the SDK's strict decoder refuses a misspelt option with its path.
//
// What the daemon sends, exactly (sdk/unstable/deployment, the daemon's own code):
//
//   - kind: the section's kind;
//   - options: the options as written, with each option_params entry bound
//     to the session's run parameters (as a string) and merged in; absent
//     when the section has neither. An option whose key names a
//     credential (password, token, secret, api_key, ...) is refused:
//     credentials go under secret_env;
//   - every other top-level key the operator wrote, unchecked by the
//     daemon and as written (a key ending in _env keeps the variable's
//     name; its value is a secret, see ConfigureRequest.Secret). Section
//     has no such keys, so its decoder refuses them; an adapter that takes
//     top-level keys of its own declares its own struct with Kind beside
//     them.
//
// The daemon's own keys (secret_env, option_params, evidence_redact_fields,
// evidence_keep_fields, freshness_field, freshness_window_s, settle_s,
// compensator, census, newness) never reach the adapter.
//
// Option values bound from run parameters are whatever the run passed, a
// wildcard or a quote included (only control characters are refused): an
// adapter that puts one into a query language escapes it for that place
// (sdk/param's BindIn or Expand with a Place of its own).
type Section[O any] struct {
	Kind    string `json:"kind"`
	Options O      `json:"options"`
}
