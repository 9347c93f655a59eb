package sim

import (
	"bytes"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// The objects a prefix source's producer drops (SourceSpec.Formats).
//
// In the worlds recorded before formats were drawn, object k is one
// Parquet row group holding unit k, a unit of its own (its offset
// 1<<63 | 1). In the others each object is JSON lines (.jsonl or
// .ndjson), CSV with a header (.csv) or Parquet of one to four row
// groups (.parquet), chosen per object, and is often several chunks
// long, so the source cuts it into several units and a crash can stop
// it mid-object. Every object is made of pieces — runs of rows the
// source never splits: a text record, a row group — each an oracle unit
// of its own: its rows carry its id, and it has the offset value that
// covers it (the byte just after its record, or its row-group count,
// with bit 63 on the object's last). A unit of the source is then a
// contiguous run of one object's pieces (prefix_units.go).
//
// Some objects cannot be ingested (SourceSpec.CorruptPermille): a JSON
// line that is no JSON as the first record, a CSV record with a cell too
// many as the first, a Parquet file cut short of its footer, or an
// extension no format has. Their rows are no unit's: a segment holding
// one fails the oracle, and the source must skip each object, counting
// it.

// FormatsMixed is SourceSpec.Formats for objects of every format.
const FormatsMixed = "mixed"

// An object's format.
const (
	objJSONL   = "jsonl"
	objCSV     = "csv"
	objParquet = "parquet"
)

// pieceBits: in the worlds with formats, a piece's id is its object's
// id plus its index (below 2^20), the object's sequence number shifted
// above it.
const pieceBits = 20

// objectLayout is one dropped object: its name under the source's
// prefix, its offset key, and its pieces in order.
type objectLayout struct {
	name, offsetKey string
	format          string
	corrupt         string // what keeps it from being ingested; "" if nothing
	pieces          []piece
}

// piece is a run of rows the source never splits: its id, its rows,
// and the object's offset value once it is ingested.
type piece struct {
	uid  UID
	rows int
	end  uint64
}

// objBase is the id of object k of source idx (in a world with formats),
// and of its first piece.
func objBase(idx int, k uint64) UID { return makeUID(idx, 0, k<<pieceBits) }

func pieceIndex(uid UID) int { return int(uid.seq() & (1<<pieceBits - 1)) }

func objFormat(base UID) string {
	return [...]string{objJSONL, objCSV, objParquet}[mix64(uint64(base)^0x0bec7f0e)%3]
}

// objRows is how many rows object base has: as many as a unit would.
func objRows(spec SourceSpec, base UID) int { return unitRows(spec, base) }

// objGroups splits a Parquet object's rows into one to four row groups.
func objGroups(spec SourceSpec, base UID) []int {
	rows := objRows(spec, base)
	n := min(1+int(mix64(uint64(base)^0x6709)%4), rows)
	out := make([]int, n)
	for g := range out {
		out[g] = rows / n
		if g < rows%n {
			out[g]++
		}
	}
	return out
}

// objCorrupt is what keeps object base from being ingested, if anything.
func objCorrupt(spec SourceSpec, base UID) (string, bool) {
	h := mix64(uint64(base) ^ 0xc0220907)
	if h%1000 >= uint64(spec.CorruptPermille) {
		return "", false
	}
	return [...]string{badLine, raggedRecord, cutFooter, unknownExtension}[(h>>16)%4], true
}

// What keeps an object from being ingested.
const (
	badLine          = "a first line that is no JSON"
	raggedRecord     = "a first CSV record with a cell too many"
	cutFooter        = "a Parquet file cut short of its footer"
	unknownExtension = "an extension no format has"
)

// pieceContent is piece uid's rows (a world with formats): a text
// record, or a row group, numbered within the object.
func pieceContent(spec SourceSpec, uid UID) arrow.RecordBatch {
	base, i := uid-UID(pieceIndex(uid)), pieceIndex(uid)
	if objFormat(base) != objParquet {
		return batchOf(uid, i, payloadWindow(spec, uid, 1, true))
	}
	groups := objGroups(spec, base)
	first := 0
	for _, n := range groups[:i] {
		first += n
	}
	return batchOf(uid, first, payloadWindow(spec, uid, groups[i], true))
}

// buildObject makes object k: its layout and bytes. Its pieces are
// produced as it is made (the oracle learns their rows).
func (s *source) buildObject(k uint64) (*objectLayout, []byte, error) {
	if s.spec.Formats == "" {
		return s.unitObject(k)
	}
	base := objBase(s.idx, k)
	if why, bad := objCorrupt(s.spec, base); bad {
		return s.corruptObject(k, base, why)
	}
	f := objFormat(base)
	if f == objParquet {
		return s.parquetObject(k, base, true)
	}
	return s.textObject(k, base, f, true)
}

// layout starts object k's layout under name.
func (s *source) layout(name, format string) *objectLayout {
	return &objectLayout{name: name, offsetKey: "objects/" + s.spec.Name + "/" + name, format: format}
}

func objName(k uint64, f string) string {
	ext := f
	if f == objJSONL && k%2 == 0 {
		ext = "ndjson"
	}
	return fmt.Sprintf("%010d.%s", k, ext)
}

// unitObject is object k of a world without formats: unit k as one
// Parquet row group, the objects source's offset 1<<63 | 1 covering it.
func (s *source) unitObject(k uint64) (*objectLayout, []byte, error) {
	uid := makeUID(s.idx, 0, k)
	in := s.unit(uid)
	defer in.Batches[0].Release()
	body, err := parquetBody(unitSchema, in.Batches)
	obj := s.layout(fmt.Sprintf("%010d.parquet", k), objParquet)
	obj.pieces = []piece{{uid: uid, rows: int(in.Batches[0].NumRows()), end: 1<<63 | 1}}
	return obj, body, err
}

// textObject is object base as JSON lines or CSV, a piece per record;
// produce says whether its pieces are the oracle's units.
func (s *source) textObject(k uint64, base UID, f string, produce bool) (*objectLayout, []byte, error) {
	obj := s.layout(objName(k, f), f)
	var buf bytes.Buffer
	if f == objCSV {
		buf.WriteString("uid,row,payload\n")
	}
	for r := range objRows(s.spec, base) {
		uid := base + UID(r)
		p := payloadWindow(s.spec, uid, 1, true).payload(0)
		if f == objCSV && !textCell(p) {
			return nil, nil, fmt.Errorf("row %d's payload %q would not read as text in CSV", r, p)
		}
		writeRecord(&buf, f, uid, r, p)
		if produce {
			var d RowDigest
			d.AddRow(int64(uid), int32(r), p)
			s.w.oracle.producedDigest(uid, d)
		}
		obj.pieces = append(obj.pieces, piece{uid: uid, rows: 1, end: uint64(buf.Len())})
	}
	return obj, buf.Bytes(), nil
}

// writeRecord writes one row as a JSON line or a CSV record: payloads
// are letters and digits, and need no quoting.
func writeRecord(w io.Writer, f string, uid UID, r int, payload string) {
	if f == objCSV {
		fmt.Fprintf(w, "%d,%d,%s\n", uid, r, payload)
		return
	}
	fmt.Fprintf(w, `{"uid":%d,"row":%d,"payload":"%s"}`+"\n", uid, r, payload)
}

// parquetObject is object base as Parquet, a row group per piece.
func (s *source) parquetObject(k uint64, base UID, produce bool) (*objectLayout, []byte, error) {
	obj := s.layout(objName(k, objParquet), objParquet)
	groups := objGroups(s.spec, base)
	var batches []arrow.RecordBatch
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	for g, n := range groups {
		uid := base + UID(g)
		b := pieceContent(s.spec, uid)
		batches = append(batches, b)
		if produce {
			s.w.oracle.produced(uid, b, nil)
		}
		end := uint64(g + 1)
		if g == len(groups)-1 {
			end |= 1 << 63
		}
		obj.pieces = append(obj.pieces, piece{uid: uid, rows: n, end: end})
	}
	body, err := parquetBody(unitSchema, batches)
	return obj, body, err
}

// corruptObject is object base made so that it cannot be ingested, as
// why says. Its rows' ids are no unit's; it has no pieces.
func (s *source) corruptObject(k uint64, base UID, why string) (*objectLayout, []byte, error) {
	var obj *objectLayout
	var body []byte
	var err error
	switch why {
	case cutFooter:
		obj, body, err = s.parquetObject(k, base, false)
		body = body[:max(len(body)-8, 0)] // the footer's length and magic
	case unknownExtension:
		_, body, err = s.textObject(k, base, objJSONL, false)
		obj = s.layout(fmt.Sprintf("%010d.json", k), objJSONL)
	case raggedRecord:
		obj, body, err = s.textObject(k, base, objCSV, false)
		body = breakFirstRecord(body, objCSV, base)
	default:
		obj, body, err = s.textObject(k, base, objJSONL, false)
		body = breakFirstRecord(body, objJSONL, base)
	}
	if err != nil {
		return nil, nil, err
	}
	obj.corrupt, obj.pieces = why, nil
	return obj, body, nil
}

// breakFirstRecord makes a text object's first record bad input: a JSON
// line cut short, or a CSV record with a cell too many.
func breakFirstRecord(body []byte, f string, base UID) []byte {
	if f == objCSV {
		header := bytes.IndexByte(body, '\n') + 1
		end := header + bytes.IndexByte(body[header:], '\n')
		return append(append(bytes.Clone(body[:end]), ",surplus"...), body[end:]...)
	}
	bad := fmt.Sprintf(`{"uid":%d,"row":0,"payload":"cut short`+"\n", base)
	return append([]byte(bad), body[bytes.IndexByte(body, '\n')+1:]...)
}

// parquetBody is batches of schema as a Parquet file, a row group each.
func parquetBody(schema *arrow.Schema, batches []arrow.RecordBatch) ([]byte, error) {
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(1 << 30))
	w, err := pqarrow.NewFileWriter(schema, &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(memory.DefaultAllocator)))
	if err != nil {
		return nil, err
	}
	for _, b := range batches {
		if err := w.Write(b); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
