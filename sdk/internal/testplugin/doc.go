// Command testplugin is the adapter binary the SDK's own tests build and
// drive through go-plugin. Its configuration picks a behaviour:
//
//   - "synthetic": captures generate records on the fly; the selector's
//     "mode" asks for a count ("many", with "count"), an endless stream
//     ("endless"), a panic mid-stream ("panic"), stray prints to stdout
//     ("print"), or the names of its environment variables ("env").
//   - "file": a tiny real system of record, a JSON-lines file at "path".
//     It is unreachable while "<path>.down" exists, and refuses any
//     secret in the "password" slot (secret_env: {password: VAR}) other
//     than the content of "<path>.password".
//
// It is test scaffolding for the SDK, not an example of a good adapter.
package main
