package sdk

import (
	"fmt"
	"slices"
)

// ShapeError says that a record could not be shaped into the flat record
// the judge reads: a field the adapter offers as single-valued holds
// several values (an LDAP attribute with two values, a JSON array where a
// scalar is read), or a value has no form the record can carry. Record
// names the record (its identity, or where the adapter found it) and Field
// the field.
//
// An adapter never drops such a record, never keeps one of its values,
// and never leaves the field out: any of these makes a record the
// contract selects invisible, and a read that then looks empty would halt
// the step as if nothing had been written. It fails the read instead
// (Unshapeable): INDETERMINATE, with the reason naming the record and the
// field.
type ShapeError struct {
	// Record names the record: its identity, or where the adapter read it.
	Record string
	// Field is the field that could not be shaped.
	Field string
	// Reason says what the field held and what to change.
	Reason string
}

// Error names the record and the field.
func (e *ShapeError) Error() string {
	return fmt.Sprintf("record %s, field %s: %s", e.Record, e.Field, e.Reason)
}

// Unshapeable is the Capture of a read holding a record the adapter could
// not shape (err, a *ShapeError or an error that names the record and the
// field as one does): unreachable, its reason saying that the read is not
// judged and why. The daemon judges it INDETERMINATE, never as a read
// without that record.
func Unshapeable(err error) Capture {
	return Unreachable("a record could not be shaped, so the read is not judged (a read without it could look like a missing write): %v", err)
}

// SingleValue returns the one value of a field the adapter offers as
// single-valued, read from a system that stores it as a list of values (an
// LDAP attribute, a tag list). No value is ok == false: the field is
// absent from the record. Several values are a *ShapeError naming record
// and field, whatever the values are (the same value twice included, since
// the system then holds an entry the adapter's reading of it does not
// describe): fail the read with Unshapeable, never drop the record.
func SingleValue[T any](record, field string, values []T) (v T, ok bool, err error) {
	switch len(values) {
	case 0:
		return v, false, nil
	case 1:
		return values[0], true, nil
	}
	return v, false, &ShapeError{Record: record, Field: field, Reason: fmt.Sprintf(
		"holds %d values, but the adapter offers it as a single value (a contract selects on or reads it); "+
			"correct the entry in the system of record, or read the field as a list (a list never matches a contract's value)", len(values))}
}

// Reads reports whether a contract of the read req looks at field: it is
// in the selector or in ReadFields, or ReadFields is empty (an older
// daemon that does not send the list: every field is read). An adapter
// may yield a multi-valued field no contract reads as a list, and must
// fail the read (Unshapeable) on one a contract reads that it cannot
// shape.
func (r CaptureRequest) Reads(field string) bool {
	if _, ok := r.Selector[field]; ok {
		return true
	}
	return len(r.ReadFields) == 0 || slices.Contains(r.ReadFields, field)
}
