package httpsrc

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrTooLarge: the body is over Limits.BodyBytes, claims to be (an Arrow
// message length), or would decode to more memory than the body limit
// allows (decodedBytesMax). The server answers 413.
var ErrTooLarge = errors.New("request body too large")

// ErrUnsupportedType: a Content-Type this package does not decode. The
// server answers 415.
var ErrUnsupportedType = errors.New("unsupported content type")

// InputError is a body this package refuses as bad input; the server
// answers 400 with its text.
type InputError struct {
	// Line is 1-based: the JSON line, or the line a CSV record starts
	// on (the cell's own line, for a cell at fault). 0 when no line is
	// involved: an Arrow stream, a body with no rows.
	Line int
	// Column is the field or column involved, if one is and its name is
	// valid (an invalid name is quoted in Reason instead).
	Column string
	// Reason says what is wrong, naming the values involved.
	Reason string
}

func (e *InputError) Error() string {
	switch {
	case e.Line > 0 && e.Column != "":
		return fmt.Sprintf("line %d, field %q: %s", e.Line, e.Column, e.Reason)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
	case e.Column != "":
		return fmt.Sprintf("field %q: %s", e.Column, e.Reason)
	}
	return e.Reason
}

func inputErrorf(line int, column, format string, args ...any) *InputError {
	return &InputError{Line: line, Column: column, Reason: fmt.Sprintf(format, args...)}
}

// tooLargef returns an error wrapping ErrTooLarge.
func tooLargef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrTooLarge, fmt.Sprintf(format, args...))
}

// quoteMax bounds a value quoted into an error message: the message goes
// back to the client and into logs, and a value may be a megabyte long.
const quoteMax = 64

// quote returns s quoted, cut to quoteMax bytes (at a rune boundary,
// marked with …) so that an error message stays short.
func quote(s string) string {
	if len(s) <= quoteMax {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…", s[:runeCut(s, quoteMax)])
}

// clip returns s, valid UTF-8 text such as a number, cut to quoteMax
// bytes like quote but without quotes.
func clip(s string) string {
	if len(s) <= quoteMax {
		return s
	}
	return s[:runeCut(s, quoteMax)] + "…"
}

// runeCut returns the largest rune boundary in s at or before n < len(s).
func runeCut(s string, n int) int {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// reasonMax bounds a message from another library (the Arrow reader's
// and validator's quote whole values) put into an InputError.
const reasonMax = 256

// shorten returns msg cut to reasonMax bytes, valid UTF-8.
func shorten(msg string) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if len(msg) <= reasonMax {
		return msg
	}
	return msg[:runeCut(msg, reasonMax)] + "…"
}
