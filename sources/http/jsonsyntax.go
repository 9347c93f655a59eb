package httpsrc

import "unicode/utf8"

// JSON values, checked as RFC 8259 and encoding/json's scanner define
// them, with the UTF-8 of strings checked as utf8.Valid does (json.Valid
// takes any byte of 0x80 or above inside a string; outside strings only
// ASCII is JSON). Each function takes the value's first byte at b[i]
// and returns the offset just past the value, and false if the bytes
// there are no such value. What follows a value (a delimiter, space or
// the end) is for the caller to check: "truex" is "true", then a byte no
// caller takes.

// value scans any value at b[i]; depth is the nesting depth of the
// object or array holding it (0 for a line's own value). It adds to
// s.flags what it notes.
func (s *lineScanner) value(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; c {
	case '"':
		end, esc, ok := scanString(b, i)
		if esc {
			s.flags |= valEscaped
		}
		return end, ok
	case '{', '[':
		return s.nested(b, i, depth+1)
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	}
	end, float, ok := scanNumber(b, i)
	if float {
		s.flags |= valFloat
	}
	return end, ok
}

// nested scans the object or array at b[i], itself at depth.
func (s *lineScanner) nested(b []byte, i, depth int) (int, bool) {
	if depth > maxNestingDepth {
		return 0, false
	}
	isObject, end := b[i] == '{', b[i]+2 // '}' is '{'+2, ']' is '['+2
	i = s.space(b, i+1)
	if i < len(b) && b[i] == end {
		return i + 1, true
	}
	for {
		var ok bool
		if isObject {
			if i, ok = s.key(b, i); !ok {
				return 0, false
			}
		}
		if i, ok = s.value(b, i, depth); !ok {
			return 0, false
		}
		if i = s.space(b, i); i == len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = s.space(b, i+1)
		case end:
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// key scans a nested object's key at b[i] and its ':', and returns the
// offset of the member's value.
func (s *lineScanner) key(b []byte, i int) (int, bool) {
	if i == len(b) || b[i] != '"' {
		return 0, false
	}
	end, _, ok := scanString(b, i)
	if !ok {
		return 0, false
	}
	if i = s.space(b, end); i == len(b) || b[i] != ':' {
		return 0, false
	}
	return s.space(b, i+1), true
}

// space is skipSpace inside a nested value, noting valSpaced if it
// skips anything: such a value is stored compacted.
func (s *lineScanner) space(b []byte, i int) int {
	if j := skipSpace(b, i); j != i {
		s.flags |= valSpaced
		return j
	}
	return i
}

// stringByte marks the bytes a string holds as themselves: printable
// ASCII and DEL, but the quote and the backslash.
var stringByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString scans the string literal at b[i] ('"'), and reports
// whether it holds an escape.
func scanString(b []byte, i int) (end int, escaped, ok bool) {
	for i++; i < len(b); {
		c := b[i]
		switch {
		case stringByte[c]:
			i++
		case c == '"':
			return i + 1, escaped, true
		case c == '\\':
			n := escapeLen(b, i)
			if n == 0 {
				return 0, false, false
			}
			i, escaped = i+n, true
		case c < 0x20: // a control character must be escaped
			return 0, false, false
		default: // 0x80 or above: UTF-8
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, false, false
			}
			i += size
		}
	}
	return 0, false, false
}

// escapeLen returns the length of the escape at b[i] ('\\'), 0 if it
// is none: \" \\ \/ \b \f \n \r \t, or \u and four hex digits (any: a
// lone surrogate is valid JSON, and decodes to U+FFFD).
func escapeLen(b []byte, i int) int {
	if i+1 >= len(b) {
		return 0
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if i+6 > len(b) {
			return 0
		}
		for _, c := range b[i+2 : i+6] {
			if !isHex(c) {
				return 0
			}
		}
		return 6
	}
	return 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNumber scans the number at b[i]: -?(0|[1-9][0-9]*)(\.[0-9]+)?
// ([eE][+-]?[0-9]+)?, and reports whether it has a fraction or an
// exponent.
func scanNumber(b []byte, i int) (end int, float, ok bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i == len(b) || !isDigit(b[i]):
		return 0, false, false
	case b[i] == '0':
		i++
	default:
		i = digits(b, i)
	}
	if i < len(b) && b[i] == '.' {
		if i++; i == len(b) || !isDigit(b[i]) {
			return 0, false, false
		}
		i, float = digits(b, i), true
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i == len(b) || !isDigit(b[i]) {
			return 0, false, false
		}
		i, float = digits(b, i), true
	}
	return i, float, true
}

// digits returns the offset past the run of digits at b[i].
func digits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

// literal scans word (true, false or null) at b[i].
func literal(b []byte, i int, word string) (int, bool) {
	if len(b)-i >= len(word) && string(b[i:i+len(word)]) == word {
		return i + len(word), true
	}
	return 0, false
}
