package httpsrc

import (
	"encoding/json"
	"fmt"
)

// The fast path of a JSON line: once json.Valid has checked the whole
// line (one pass, no allocation), its top-level object is split into
// members by scanObject without a json.Decoder — the decoder's tokens
// and one RawMessage a member cost several allocations each, and were
// most of the time of a JSON-lines body. A line that is not valid JSON,
// or not an object, takes the decoder's path, which words the error.
//
// scanObject REQUIRES valid JSON: on valid input every span it returns is
// exactly what json.Decoder would return for the member (the key's
// literal with its quotes, the value's raw bytes); it does not re-check
// the syntax, and it panics, naming the offset, if it meets something
// valid JSON cannot hold (an invariant of json.Valid, not of the input).

// scanObject calls member with each member of text's object, in order:
// the key's literal (quotes included) and the value's raw text. It
// reports false if text's top-level value is not an object.
// REQUIRES: json.Valid(text).
func scanObject(text []byte, member func(key, raw []byte) error) (bool, error) {
	i := skipSpace(text, 0)
	if text[i] != '{' {
		return false, nil
	}
	i = skipSpace(text, i+1)
	if text[i] == '}' {
		return true, nil
	}
	for {
		keyEnd := endOfString(text, i)
		key := text[i:keyEnd]
		i = skipSpace(text, keyEnd)
		mustBe(text, i, ':')
		start := skipSpace(text, i+1)
		end := endOfValue(text, start)
		if err := member(key, text[start:end]); err != nil {
			return true, err
		}
		i = skipSpace(text, end)
		if text[i] == '}' {
			return true, nil
		}
		mustBe(text, i, ',')
		i = skipSpace(text, i+1)
	}
}

// keyText is the text of a key literal: as written without escapes, else
// unescaped by encoding/json.
func keyText(lit []byte) (string, error) {
	for _, c := range lit[1 : len(lit)-1] {
		if c == '\\' {
			var s string
			err := json.Unmarshal(lit, &s)
			return s, err
		}
	}
	return string(lit[1 : len(lit)-1]), nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func mustBe(b []byte, i int, c byte) {
	if i >= len(b) || b[i] != c {
		panic(fmt.Sprintf("httpsrc: scanObject: want %q at offset %d of a line json.Valid accepted", c, i))
	}
}

// endOfString returns the offset just past the string literal at i.
func endOfString(b []byte, i int) int {
	mustBe(b, i, '"')
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped byte; \uXXXX's digits are plain bytes
		case '"':
			return i + 1
		}
	}
	panic(fmt.Sprintf("httpsrc: scanObject: a string without its end in a line json.Valid accepted (from offset %d)", i))
}

// endOfValue returns the offset just past the value at i.
func endOfValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return endOfString(b, i)
	case '{', '[':
		return endOfNested(b, i)
	}
	for i < len(b) && !isDelimiter(b[i]) {
		i++ // a number, true, false or null
	}
	return i
}

func isDelimiter(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// endOfNested returns the offset just past the object or array at i.
func endOfNested(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = endOfString(b, i) - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	panic(fmt.Sprintf("httpsrc: scanObject: a nested value without its end in a line json.Valid accepted (from offset %d)", i))
}
