package httpsrc

// appendCompact appends raw, a valid JSON value, to dst without the
// spaces between its tokens: what json.Compact writes for it (which,
// unlike json.Marshal, escapes nothing). Spaces inside strings stay, and
// a valid string holds no raw tab, CR or LF, so outside strings every
// such byte is a space between tokens.
// REQUIRES: raw is valid JSON (the scanner accepted it).
func appendCompact(dst, raw []byte) []byte {
	start := 0
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			i = endOfValidString(raw, i) - 1
		case isSpace(c):
			dst = append(dst, raw[start:i]...)
			start = i + 1
		}
	}
	return append(dst, raw[start:]...)
}

// endOfValidString returns the offset just past the string literal at
// b[i] of valid JSON.
func endOfValidString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++ // the escaped byte; \uXXXX's digits are plain bytes
		case '"':
			return i + 1
		}
	}
	return len(b)
}
