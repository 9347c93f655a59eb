package httpsrc

// The fast path of a JSON line: one pass over the line checks that it
// is valid UTF-8 and valid JSON — exactly what utf8.Valid and json.Valid
// accept together, nesting limit included — and, when its value is an
// object, splits that object into members, noting per member what the
// decoder will need (an escape to undo, a nested value's spaces to drop,
// a number's fraction). It allocates nothing once its buffers have grown
// to the longest line. A line it does not accept as an object takes
// json.Decoder's path (jsonl.go), which words the error; nothing of a
// line is stored before the line is accepted, so the error is the one
// the decoder's path finds, whatever a member would have said.
//
// The property test (jsonscan_test.go) and FuzzScanLine hold the scanner
// to utf8.Valid && json.Valid, and its members to what json.Decoder
// reads.

// lineVerdict is what scanLine found a line to be.
type lineVerdict int

const (
	lineInvalid   lineVerdict = iota // not valid UTF-8, or not valid JSON
	lineNotObject                    // valid, but its value is no object
	lineObject                       // valid, an object: members are set
)

// jsonMember is one member of a line's object, as offsets into the line
// (no pointers: a slice of them costs the garbage collector nothing).
type jsonMember struct {
	keyStart, keyEnd int  // the key's literal, quotes included
	start, end       int  // the value's JSON text
	keyEsc           bool // the key holds an escape
	flags            valueFlags
}

// key returns m's key literal, quotes included, in line.
func (m *jsonMember) key(line []byte) []byte { return line[m.keyStart:m.keyEnd] }

// raw returns m's value as written in line.
func (m *jsonMember) raw(line []byte) []byte { return line[m.start:m.end] }

// valueFlags is what the scan noted of a value.
type valueFlags uint8

const (
	valEscaped valueFlags = 1 << iota // a string with an escape
	valSpaced                         // an object or array with spaces between its tokens
	valFloat                          // a number with a fraction or an exponent
)

// lineScanner scans lines; its buffers are reused from line to line.
type lineScanner struct {
	members []jsonMember // of the last line scanned, if an object
	flags   valueFlags   // of the value being scanned
}

// maxNestingDepth is encoding/json's: a value nested deeper (the line's
// own object or array counting as 1) is invalid JSON to json.Valid.
const maxNestingDepth = 10000

// scanLine scans text, a whole line, and says what it is; for an object
// it sets s.members.
func (s *lineScanner) scanLine(text []byte) lineVerdict {
	s.members = s.members[:0]
	i := skipSpace(text, 0)
	if i < len(text) && text[i] == '{' {
		if end, ok := s.object(text, i); ok && skipSpace(text, end) == len(text) {
			return lineObject
		}
		return lineInvalid
	}
	if end, ok := s.value(text, i, 0); ok && skipSpace(text, end) == len(text) {
		return lineNotObject
	}
	return lineInvalid
}

// object scans the line's top-level object at b[i] ('{'), appending its
// members to s.members; it returns the offset past its '}'.
func (s *lineScanner) object(b []byte, i int) (int, bool) {
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		s.members = append(s.members, jsonMember{})
		m := &s.members[len(s.members)-1]
		if !s.member(b, i, m) {
			return 0, false
		}
		i = skipSpace(b, m.end)
		if i == len(b) {
			return 0, false
		}
		switch b[i] {
		case '}':
			return i + 1, true
		case ',':
			i = skipSpace(b, i+1)
		default:
			return 0, false
		}
	}
}

// member scans the member at b[i] (its key's '"') of the top-level
// object into m.
func (s *lineScanner) member(b []byte, i int, m *jsonMember) bool {
	if i == len(b) || b[i] != '"' {
		return false
	}
	m.keyStart = i
	var ok bool
	if m.keyEnd, m.keyEsc, ok = scanString(b, i); !ok {
		return false
	}
	if i = skipSpace(b, m.keyEnd); i == len(b) || b[i] != ':' {
		return false
	}
	m.start = skipSpace(b, i+1)
	s.flags = 0
	m.end, ok = s.value(b, m.start, 1)
	m.flags = s.flags
	return ok
}

// skipSpace returns the offset of the first byte at or after i that is
// not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
