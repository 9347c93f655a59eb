package objects

import (
	"errors"
	"fmt"
	"strings"

	httpsrc "github.com/skipprd/skipprd/sources/http"
)

// ObjectError is an object the source cannot ingest as it is: bad
// input, a record too long for a unit, an unreadable Parquet file. With
// OnError "stop" Run returns it; with "skip" it is logged.
type ObjectError struct {
	Source string
	Object string // the key
	// Line is the 1-based line in the object (text formats), 0 if none
	// or unknown; Offset the byte offset where that line (or the record
	// at fault) starts, -1 if none.
	Line   int
	Offset int64
	// RowGroup is the Parquet row group at fault, -1 if none.
	RowGroup int
	Field    string // the field or column involved, if one is
	Reason   string // what is wrong, naming the values involved
	Err      error  // the cause: *httpsrc.InputError (its Line the object's), httpsrc.ErrTooLarge, …
}

func (e *ObjectError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "objects source %q: object %q: ", e.Source, e.Object)
	switch {
	case e.RowGroup >= 0:
		fmt.Fprintf(&b, "row group %d: ", e.RowGroup)
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d (byte offset %d): ", e.Line, e.Offset)
	case e.Offset >= 0:
		fmt.Fprintf(&b, "byte offset %d: ", e.Offset)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q: ", e.Field)
	}
	b.WriteString(e.Reason)
	return b.String()
}

func (e *ObjectError) Unwrap() error { return e.Err }

// contentError is a fault in an object's bytes found while reading it,
// before its Source and absolute line are known. line is relative to
// where the reader started (1 = its first line).
type contentError struct {
	line   int
	offset int64
	reason string
	err    error
}

func (e *contentError) Error() string {
	return fmt.Sprintf("relative line %d (byte offset %d): %s", e.line, e.offset, e.reason)
}

func (e *contentError) Unwrap() error { return e.err }

// storeError: listing or reading the store failed (the network, a file
// removed). Nothing is skipped: the object is tried again at the next
// poll, from its acked position.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// hostError: the host refuses every unit from now on (engine.ErrClosed
// while Run's context is live); Run returns it.
type hostError struct{ err error }

func (e *hostError) Error() string { return e.err.Error() }
func (e *hostError) Unwrap() error { return e.err }

// invariantError: an invariant of this package is broken — a bug. Run
// stops and returns it rather than act on a state it cannot trust.
type invariantError struct{ msg string }

func (e *invariantError) Error() string { return "objects source: internal: " + e.msg }

func invariantf(format string, args ...any) error {
	return &invariantError{msg: fmt.Sprintf(format, args...)}
}

// errStopped: Run's context ended; Run returns nil.
var errStopped = errors.New("objects source: stopped")

// errNoRows: what is left of an object holds no rows (blank lines, a
// CSV header alone, row groups of no rows): there is no unit to carry
// its offset, so the source remembers it in memory only.
var errNoRows = errors.New("objects source: no rows left")

// inputError is a copy of e with its Line the object's.
func inputError(e *httpsrc.InputError, line int) *httpsrc.InputError {
	c := *e
	c.Line = line
	return &c
}
