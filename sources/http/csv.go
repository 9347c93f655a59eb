package httpsrc

import (
	"encoding/csv"
	"errors"
	"io"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// decodeCSV reads a CSV body (RFC 4180, as encoding/csv reads it): a
// header naming the columns, then one row per record. Types are inferred
// per column over the whole body, so cells are kept (in Go memory, a
// small multiple of the body) until the last record is read.
func decodeCSV(body io.Reader, lim Limits, mem memory.Allocator) (*Decoded, error) {
	br := textReader(body)
	defer releaseTextReader(br) // cr's records are copies
	cr := csv.NewReader(&lineGuard{r: br, max: lim.LineBytes})
	cr.ReuseRecord = false // the cells of every record are kept
	header, err := readHeader(cr, lim)
	if err != nil {
		return nil, err
	}
	cols := make([]*csvColumn, len(header))
	for i, name := range header {
		cols[i] = newCSVColumn(name)
	}
	rows, err := readRows(cr, header, cols, lim)
	if err != nil {
		return nil, err
	}
	settled := make([]*column, len(cols))
	for i, c := range cols {
		if settled[i], err = c.finish(); err != nil {
			return nil, err
		}
	}
	// Header order: a CSV file's column order is part of what it says.
	return buildDecoded(settled, rows, lim, mem)
}

// readRows reads the records after the header into cols and returns how
// many there were: at least one, at most lim.Rows.
func readRows(cr *csv.Reader, header []string, cols []*csvColumn, lim Limits) (int, error) {
	rows := 0
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, csvError(err, rec, len(header))
		}
		if err := checkRecord(cr, rec, header, lim); err != nil {
			return 0, err
		}
		if rows == lim.Rows {
			line, _ := cr.FieldPos(0)
			return 0, inputErrorf(line, "", "more than %d rows in the body", lim.Rows)
		}
		for i, cell := range rec {
			cols[i].add(int32(rows), cell)
		}
		rows++
	}
	if rows == 0 {
		return 0, &InputError{Reason: "no rows"}
	}
	return rows, nil
}

// readHeader reads the first record: the column names, non-empty, valid
// UTF-8, at most nameBytesMax bytes, unique, at most lim.Fields of them.
// Every later record must have as many fields.
func readHeader(cr *csv.Reader, lim Limits) ([]string, error) {
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &InputError{Reason: "no rows"}
	}
	if err != nil {
		return nil, csvError(err, header, 0)
	}
	if err := checkRecord(cr, header, nil, lim); err != nil {
		return nil, err
	}
	line, _ := cr.FieldPos(0)
	if len(header) > lim.Fields {
		return nil, inputErrorf(line, "", "the header has %d columns; at most %d", len(header), lim.Fields)
	}
	seen := make(map[string]int, len(header))
	for i, name := range header {
		if p := nameProblem(name); p != "" {
			return nil, inputErrorf(line, "", "header column %d: %s", i+1, p)
		}
		if j, dup := seen[name]; dup {
			return nil, inputErrorf(line, name, "header columns %d and %d have the same name", j+1, i+1)
		}
		seen[name] = i
	}
	cr.FieldsPerRecord = len(header)
	return header, nil
}

// checkRecord checks the record just read: every cell valid UTF-8, and
// its cells and commas at most lim.LineBytes bytes (a quoted cell may
// span lines, so the line guard alone does not bound a record). names
// are the columns', nil for the header itself.
func checkRecord(cr *csv.Reader, rec, names []string, lim Limits) error {
	size := len(rec) - 1 // the commas
	for i, cell := range rec {
		size += len(cell)
		if !utf8.ValidString(cell) {
			line, _ := cr.FieldPos(i)
			name := ""
			if names != nil {
				name = names[i]
			}
			return inputErrorf(line, name, "%s is not valid UTF-8", quote(cell))
		}
	}
	if size > lim.LineBytes {
		line, _ := cr.FieldPos(0)
		return inputErrorf(line, "", "the record is longer than %d bytes", lim.LineBytes)
	}
	return nil
}

// csvError turns what encoding/csv returned with rec into an
// *InputError naming the line; a read error (ErrTooLarge among them) is
// returned as it is. want is the header's field count.
func csvError(err error, rec []string, want int) error {
	var ie *InputError
	if errors.As(err, &ie) {
		return ie
	}
	var pe *csv.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	if errors.Is(pe.Err, csv.ErrFieldCount) {
		return inputErrorf(pe.StartLine, "", "%d fields where the header has %d", len(rec), want)
	}
	return inputErrorf(pe.Line, "", "%v (byte %d of the line)", pe.Err, pe.Column)
}

// lineGuard stops a CSV body at its first line longer than max bytes
// (its line break, "\n" or "\r\n", not counted), before encoding/csv
// buffers it: of a body without line breaks, the reader holds max+1
// bytes (and its buffer), not the whole body.
type lineGuard struct {
	r    io.Reader
	max  int
	line int   // 0-based line of the next byte
	run  int   // bytes of that line before it
	err  error // sticky
}

func (g *lineGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.r.Read(p)
	for i, c := range p[:n] {
		if c == '\n' {
			g.line, g.run = g.line+1, 0
			continue
		}
		g.run++
		// One byte past max may be the '\r' of a "\r\n".
		if g.run > g.max+1 || (g.run == g.max+1 && c != '\r') {
			g.err = inputErrorf(g.line+1, "", "line %d is longer than %d bytes", g.line+1, g.max)
			return i, g.err
		}
	}
	if err != nil {
		g.err = err
	}
	return n, err
}
