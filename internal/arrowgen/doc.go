// Package arrowgen generates random Arrow schemas and record batches with
// pgregory.net/rapid, for property tests of code that stores Arrow data
// (for example the segment codec, which persists Arrow IPC streams).
//
// It is test support only: import it from _test.go files, never from
// production code.
//
// All randomness comes from the *rapid.T passed in, so a failing case is
// reproducible and shrinkable by rapid. Generated data covers signed and
// unsigned integers, float32/float64 (including NaN, ±Inf and -0), bool,
// utf8, binary, timestamps of every unit with and without a time zone,
// date32, the null type, lists (nested up to two levels, with empty and null
// lists) and structs of one to three children. Nullable fields get nulls
// drawn at random (sometimes none, sometimes all); non-nullable fields,
// including non-nullable list elements and struct children, never hold
// nulls. The null type is always declared nullable.
package arrowgen
