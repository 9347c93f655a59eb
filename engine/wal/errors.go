package wal

import (
	"errors"
	"fmt"

	"github.com/skipprd/skipprd/engine/segment"
)

// The WAL's errors belong to package segment's families, so the engine
// branches on one set of sentinels: every decode failure matches
// segment.ErrCorrupt (or segment.ErrUnsupportedVersion) under errors.Is,
// and every encoder refusal matches segment.ErrInvalid or
// segment.ErrTooLarge.

// FormatError describes why a record payload was rejected. It names the
// record, the field and the field's byte offset within the payload (byte
// 0 is the kind; an entry's payload starts 4 bytes into the entry).
type FormatError struct {
	Object string // caller-supplied name, e.g. the file and entry offset
	Field  string // e.g. "unit.arrow_len", "seal.ranges[2].hi"
	Offset int64  // byte offset of Field within the payload
	Err    error  // a segment sentinel: ErrCorrupt, ErrTruncated, ErrUnsupportedVersion, …
	Detail string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("wal: record %q: field %s at byte %d: %v: %s",
		e.Object, e.Field, e.Offset, e.Err, e.Detail)
}

// Unwrap matches the specific sentinel and, for the corruption family,
// segment.ErrCorrupt, exactly as segment.FormatError does.
func (e *FormatError) Unwrap() []error {
	switch e.Err {
	case segment.ErrChecksum, segment.ErrTruncated, segment.ErrRowCountMismatch:
		return []error{e.Err, segment.ErrCorrupt}
	}
	return []error{e.Err}
}

// CorruptError is Scan's verdict that a segment file is damaged, not torn:
// the entry at Offset is invalid, yet a valid entry starts at Next. A
// crash only tears the tail, so the bytes cannot be discarded; the engine
// halts. It matches segment.ErrCorrupt.
type CorruptError struct {
	Name   string // the file
	Offset int64  // the invalid entry: ScanResult.End
	Next   int64  // the first valid entry after it
	Reason string // why the entry at Offset is invalid
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("wal: segment %q: invalid entry at byte %d (%s) followed by a valid entry at byte %d: corrupt, not a torn tail",
		e.Name, e.Offset, e.Reason, e.Next)
}

func (e *CorruptError) Unwrap() error { return segment.ErrCorrupt }

// lift turns a segment decoder's *FormatError about a field embedded in a
// record into the record's *FormatError: the field gets the record's
// prefix and the offset is moved by base, the embedded bytes' position in
// the payload.
func lift(name, prefix string, base int64, err error) *FormatError {
	var fe *segment.FormatError
	if !errors.As(err, &fe) {
		return &FormatError{Object: name, Field: prefix, Offset: base, Err: segment.ErrCorrupt, Detail: err.Error()}
	}
	return &FormatError{Object: name, Field: prefix + fe.Field, Offset: base + fe.Offset, Err: fe.Err, Detail: fe.Detail}
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("wal: "+format+": %w", append(args, segment.ErrInvalid)...)
}

func tooLargef(format string, args ...any) error {
	return fmt.Errorf("wal: "+format+": %w", append(args, segment.ErrTooLarge)...)
}
