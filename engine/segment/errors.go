package segment

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers branch on these with errors.Is; every decode
// failure is a *FormatError that wraps one of them.
var (
	// ErrCorrupt: the bytes are not a valid object of the expected kind
	// (bad magic, impossible length, non-canonical field, limit exceeded).
	// ErrChecksum, ErrTruncated and ErrRowCountMismatch also match ErrCorrupt.
	ErrCorrupt = errors.New("corrupt")
	// ErrChecksum: a SHA-256 over the object does not match its stored value.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrTruncated: the object ends before a field it announces.
	ErrTruncated = errors.New("truncated")
	// ErrRowCountMismatch: a CDC sidecar's row count differs from the Arrow
	// row count of its PART, or a PART's rows differ from its index entry.
	ErrRowCountMismatch = errors.New("row count mismatch")
	// ErrUnsupportedVersion: well-formed magic with a version this build
	// cannot read. Not corruption: a newer writer may have produced it.
	ErrUnsupportedVersion = errors.New("unsupported version")
	// ErrInvalid: an encoder was handed input that would produce an object
	// the decoders reject (bad key, schema mismatch, unsorted offsets).
	ErrInvalid = errors.New("invalid input")
	// ErrTooLarge: an encoder input exceeds a named limit in limits.go.
	ErrTooLarge = errors.New("exceeds limit")
)

// FormatError describes why an object's bytes were rejected. It names the
// object, the field and the absolute byte offset of that field.
type FormatError struct {
	Kind   string // object kind, e.g. "segment body", "commit marker"
	Object string // caller-supplied name, e.g. the object key
	Field  string // e.g. "part[3].arrow_len"
	Offset int64  // absolute byte offset of Field within the object
	Err    error  // one of the sentinels above
	Detail string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("segment: %s %q: field %s at byte %d: %v: %s",
		e.Kind, e.Object, e.Field, e.Offset, e.Err, e.Detail)
}

// Unwrap lets errors.Is match both the specific sentinel and ErrCorrupt
// for the corruption family.
func (e *FormatError) Unwrap() []error {
	switch e.Err {
	case ErrChecksum, ErrTruncated, ErrRowCountMismatch:
		return []error{e.Err, ErrCorrupt}
	}
	return []error{e.Err}
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("segment: "+format+": %w", append(args, ErrInvalid)...)
}

func tooLargef(format string, args ...any) error {
	return fmt.Errorf("segment: "+format+": %w", append(args, ErrTooLarge)...)
}
