// Package param owns how a run parameter enters a read: the value grammar
// written in contracts and deployment sections, and the escaping of a
// parameter's value for the place it is substituted into. The judge, the
// daemon's configuration, the compensator and every adapter use this one
// implementation, so they cannot disagree about what a value means.
//
// # The value grammar
//
// A value is written in one of three forms:
//
//	"text"            a literal
//	{literal: "text"} a literal (for text that would otherwise be ambiguous)
//	{param: name}     the run parameter called name, bound at each run
//
// Parse reads a decoded YAML or JSON tree, ParseJSON raw JSON; Value.Bind
// looks the parameter up and refuses one the run does not supply. Numbers,
// booleans, null and lists are refused with a hint to quote them.
//
// A deployment's value may take a fourth form (Templates; ParseMap always
// allows it):
//
//	{template: "Patient/{id}"} literal text composed with run parameters
//
// Value.BindIn binds it for a place: each {name} is the parameter's value
// escaped for that place, the text around it is kept as written.
// Expand with Values.Source fills a URL template whose placeholders are
// such values, each template escaped for the place of its placeholder. A template that
// names no parameter, or holds a brace that opens or closes no {name}, is
// refused (CheckTemplate).
//
// # Where a value goes
//
// A caller supplies run parameters, and the caller is the party being
// checked, so a value must never widen or redirect a read. Every place
// refuses a value holding NUL, any other control character or invalid
// UTF-8, and then:
//
//   - Text (Check, Data): a value passed as data, such as a GraphQL
//     variable or a plugin option, is used as is.
//   - A URL path segment (PathSegment): the value is one segment. It is
//     percent-escaped; "", "." and ".." are refused (they name another
//     resource) and so is any '/' or '\', even escaped, because many servers
//     and proxies decode %2F before routing.
//   - A URL query value or fragment (QueryValue): the value is
//     query-escaped, so '&', '=', '#' and '+' cannot add parameters of their
//     own.
//   - A file name or one segment of a glob pattern (FileName): "", "." and
//     ".." and any '/' or '\' are refused; the glob metacharacters * ? [ ]
//     are escaped so the value matches only a file of exactly that name.
//
// Expand, the one way to fill a template, fills its {name} placeholders
// from a Source (Lookup, or Values.Source), choosing the place of each
// placeholder from the template's Place and where it stands: in a URL template, before the
// first '?' is the path and after it the query (or fragment); in a file
// pattern every placeholder is a file name. A placeholder name is a letter
// or '_' followed by letters, digits, '_', '.' or '-'; a brace that does not
// open such a placeholder is literal text. A placeholder may not stand in a
// URL's scheme or host.
//
// # A place of the adapter's own
//
// An adapter whose read is written in a syntax this package does not know
// (an LDAP filter or DN, a query language, a command line) declares the
// place as a Place: a name for refusals and an Escape function that writes
// a value so it stands for itself there, or refuses it. Expand with that
// Place fills a template of that syntax, every placeholder in the place;
// Place.Bind serves Value.BindIn and Values.BindWith for a single
// value. Check runs before Escape, so an escaper never sees a control
// character. Escape is a pure function of the value, which is what lets a
// fuzz test state the place's whole promise: a value either is refused or
// reads back as itself, without adding a clause or a wildcard.
//
// The package imports only the standard library and the SDK's own
// packages (refusal, and the naming of a value's type it shares with
// timestamp), so a customer's adapter can use it as well.
package param
