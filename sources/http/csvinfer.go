package httpsrc

import (
	"fmt"
	"strconv"
	"strings"
)

// candidates is a set of the types a CSV column may still be: those
// every non-empty cell so far parses as.
type candidates uint8

const (
	canInt candidates = 1 << iota
	canFloat
	canBool
	canTime
	canAll = canInt | canFloat | canBool | canTime
)

// csvColumn is a CSV column while the body is read: every non-empty cell
// as text (a utf8 column), and the types they all parse as.
type csvColumn struct {
	column
	can candidates
}

func newCSVColumn(name string) *csvColumn {
	return &csvColumn{column: column{name: name, typ: typeUTF8}, can: canAll}
}

// add adds the cell of row; an empty cell is null.
func (c *csvColumn) add(row int32, cell string) {
	if cell == "" {
		return
	}
	c.appendString(row, cell)
	c.can = narrow(c.can, cell)
}

// narrow returns the candidates in can that cell parses as.
func narrow(can candidates, cell string) candidates {
	if leadingZero(cell) {
		// "02134" is a zip code or an account number, not 2134: a column
		// holding such a cell stays text, so nothing is rewritten.
		return can &^ (canInt | canFloat | canBool | canTime)
	}
	if v, err := strconv.ParseInt(cell, 10, 64); err == nil {
		if v > exactIntMax || v < -exactIntMax {
			// As in JSON lines: no integer is rounded to fit a float64
			// column; such a column stays text instead.
			can &^= canFloat
		}
		return can &^ (canBool | canTime) // an integer is neither
	}
	can &^= canInt
	if can&canFloat != 0 {
		if _, ok := parseDecimal(cell); !ok {
			can &^= canFloat
		}
	}
	if can&canBool != 0 {
		if _, ok := parseBool(cell); !ok {
			can &^= canBool
		}
	}
	if can&canTime != 0 {
		if _, ok := parseTimestamp(cell); !ok {
			can &^= canTime
		}
	}
	return can
}

// parseDecimal parses a finite decimal number. strconv.ParseFloat alone
// would also take "NaN", "Inf", "infinity", hexadecimal ("0x1p-2") and
// underscores ("1_000"); a cell spelled so is text.
func parseDecimal(s string) (float64, bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9', c == '.', c == 'e', c == 'E', c == '+', c == '-':
		default:
			return 0, false
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil // out of range: ±Inf with an error
}

// parseBool parses exactly true, false, TRUE, FALSE, True or False.
func parseBool(s string) (v, ok bool) {
	switch s {
	case "true", "TRUE", "True":
		return true, true
	case "false", "FALSE", "False":
		return false, true
	}
	return false, false
}

// finish settles the column's type — the first of int64, float64, bool,
// timestamp its every cell parses as, else utf8 — and converts its cells.
// A column of only empty cells is utf8, as an all-null JSON field is.
func (c *csvColumn) finish() (*column, error) {
	col := &c.column
	if len(col.rows) == 0 {
		return col, nil
	}
	var parse func(k int, s string) bool
	switch {
	case c.can&canInt != 0:
		col.typ, col.ints = typeInt64, make([]int64, len(col.rows))
		parse = func(k int, s string) (ok bool) {
			var err error
			col.ints[k], err = strconv.ParseInt(s, 10, 64)
			return err == nil
		}
	case c.can&canFloat != 0:
		col.typ, col.floats = typeFloat64, make([]float64, len(col.rows))
		parse = func(k int, s string) (ok bool) { col.floats[k], ok = parseDecimal(s); return ok }
	case c.can&canBool != 0:
		col.typ, col.bools = typeBool, make([]bool, len(col.rows))
		parse = func(k int, s string) (ok bool) { col.bools[k], ok = parseBool(s); return ok }
	case c.can&canTime != 0:
		col.typ, col.ints = typeTimestamp, make([]int64, len(col.rows))
		parse = func(k int, s string) (ok bool) { col.ints[k], ok = parseTimestamp(s); return ok }
	default:
		return col, nil
	}
	for k := range col.rows {
		// Every cell parsed as this type once already; again is a bug.
		if s := string(col.textAt(k)); !parse(k, s) {
			return nil, fmt.Errorf("httpsrc: internal: column %q: cell %s does not parse as %v", col.name, quote(s), col.typ.arrow())
		}
	}
	col.text, col.ends = nil, nil
	return col, nil
}

// leadingZero reports a number spelled with a leading zero before
// another digit ("007", "-01", "00.5"), which parsing would drop.
func leadingZero(s string) bool {
	s = strings.TrimLeft(s, "+-")
	return len(s) > 1 && s[0] == '0' && s[1] >= '0' && s[1] <= '9'
}
