// Package jsontext holds the small JSON grammar checks that the record
// encoder (toproto) and decoder (fromproto) share.
package jsontext
