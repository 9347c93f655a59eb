package httpsrc

// jsonKind is what kind of JSON value a field has held; a field holds
// one kind, or only nulls.
type jsonKind int

const (
	kindNull jsonKind = iota // no value but null yet
	kindNumber
	kindBool
	kindString
	kindNested // objects and arrays, kept as JSON text
)

// one and many name a kind in an error message.
func (k jsonKind) one() string {
	return [...]string{"a null", "a number", "a boolean", "a string", "an object or array"}[k]
}

func (k jsonKind) many() string {
	return [...]string{"nulls", "numbers", "booleans", "strings", "objects or arrays"}[k]
}

// exactIntMax is the largest magnitude up to which every integer is a
// float64: an integer past it may only widen to float64 by rounding.
const exactIntMax = 1 << 53

// jsonField is a field of a JSON lines body while the body is read: its
// values so far, and what inference has seen of them.
//
// A number field holds ints until the first fraction, then floats (its
// ints converted); a string field holds its text, and µs in ints as
// long as every string so far was an RFC 3339 timestamp.
type jsonField struct {
	column
	kind      jsonKind
	lastRow   int32  // the row the field was last seen in, null or not: duplicate keys
	floatLine int    // kindNumber: the first line with a float, 0 if none yet
	floatText string // kindNumber: that float, as written
	notTime   bool   // kindString: a string that is no RFC 3339 timestamp was seen
}

// setKind makes k the field's kind, or names the conflict.
func (f *jsonField) setKind(line int, k jsonKind) error {
	switch {
	case f.kind == k:
		return nil
	case f.kind == kindNull:
		f.kind = k
		return nil
	}
	return inputErrorf(line, f.name, "%s where earlier lines had %s", k.one(), f.kind.many())
}

// addNumber adds a JSON number, raw as written; float if it has a
// fraction or an exponent.
func (f *jsonField) addNumber(line int, row int32, raw []byte, float bool, lineOf func(row int32) int) error {
	if err := f.setKind(line, kindNumber); err != nil {
		return err
	}
	if !float {
		v, ok := parseInt(raw)
		if !ok {
			// Rounding it into a float64 would change the value (an id,
			// most likely): refuse, and say how to send it.
			return inputErrorf(line, f.name, "integer %s does not fit in 64 bits; send it as a string", clip(string(raw)))
		}
		return f.addInt(line, row, v)
	}
	v, ok := parseFloat(raw)
	if !ok {
		return inputErrorf(line, f.name, "number %s is out of the range of a float64", clip(string(raw)))
	}
	if f.floatLine == 0 {
		if err := f.widen(line, clip(string(raw)), lineOf); err != nil {
			return err
		}
	}
	push(&f.rows, row)
	push(&f.floats, v)
	return nil
}

func (f *jsonField) addInt(line int, row int32, v int64) error {
	push(&f.rows, row)
	if f.floatLine == 0 {
		push(&f.ints, v)
		return nil
	}
	if err := f.checkExact(line, v); err != nil {
		return err
	}
	push(&f.floats, float64(v))
	return nil
}

// checkExact refuses an integer of a float64 field that float64 can only
// round: widening would change it without a word.
func (f *jsonField) checkExact(line int, v int64) error {
	if v > exactIntMax || v < -exactIntMax {
		return inputErrorf(line, f.name, "integer %d has no exact float64; the field is float64 because line %d has %s",
			v, f.floatLine, f.floatText)
	}
	return nil
}

// widen turns the field's ints into floats at its first float, text on
// line; an int that float64 cannot hold exactly is an error naming the
// int's line.
func (f *jsonField) widen(line int, text string, lineOf func(row int32) int) error {
	f.floatLine, f.floatText = line, text
	f.floats = make([]float64, len(f.ints), max(len(f.ints), 1)*2)
	for k, v := range f.ints {
		if err := f.checkExact(lineOf(f.rows[k]), v); err != nil {
			return err
		}
		f.floats[k] = float64(v)
	}
	f.ints = nil
	return nil
}

func (f *jsonField) addBool(line int, row int32, v bool) error {
	if err := f.setKind(line, kindBool); err != nil {
		return err
	}
	push(&f.rows, row)
	push(&f.bools, v)
	return nil
}

// addString adds a string value, s decoded.
func (f *jsonField) addString(line int, row int32, s []byte) error {
	if err := f.setKind(line, kindString); err != nil {
		return err
	}
	f.appendText(row, s)
	if f.notTime {
		return nil
	}
	if us, ok := parseTimestamp(s); ok {
		push(&f.ints, us)
	} else {
		f.notTime, f.ints = true, nil
	}
	return nil
}

// addNested adds an object or array, raw as written: as its compact
// JSON text, so compacted first if spaced (spaces between its tokens).
func (f *jsonField) addNested(line int, row int32, raw []byte, spaced bool) error {
	if err := f.setKind(line, kindNested); err != nil {
		return err
	}
	if !spaced {
		f.appendText(row, raw) // already compact
		return nil
	}
	push(&f.rows, row)
	reserve(&f.text, len(raw))
	f.text = appendCompact(f.text, raw)
	push(&f.ends, int32(len(f.text)))
	return nil
}

// finish settles the field's type once the body is read.
func (f *jsonField) finish() *column {
	c := &f.column
	switch {
	case f.kind == kindNumber && f.floatLine == 0:
		c.typ = typeInt64
	case f.kind == kindNumber:
		c.typ = typeFloat64
	case f.kind == kindBool:
		c.typ = typeBool
	case f.kind == kindString && !f.notTime:
		c.typ, c.text, c.ends = typeTimestamp, c.text[:0], c.ends[:0]
	default: // strings, JSON text, only nulls
		c.typ, c.ints = typeUTF8, c.ints[:0]
	}
	return c
}
