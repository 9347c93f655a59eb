package sim

import (
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/zeebo/xxh3"

	"github.com/skipprd/skipprd/engine/segment"
)

// RowDigest fingerprints rows in order — every column of every row,
// payload included, and the CDC change of each row when there is one —
// so that the oracles compare whole rows (what a source produced, what a
// segment committed, what a destination holds) without keeping them.
// Two digests are equal iff the same rows were added in the same order
// (up to 64-bit hash collisions).
//
// The sum is a polynomial hash of the words added (each mixed first), so
// digests compose: the digest of a job that spans segments is the Then of
// its segments' digests, in order, computed without the rows.
type RowDigest struct {
	Rows  int
	Words int
	Sum   uint64
}

// digestBase is the polynomial's base (odd: multiplying by it is a
// bijection mod 2⁶⁴).
const digestBase = 0x100000001b3

func (d *RowDigest) word(v uint64) {
	d.Sum = d.Sum*digestBase + mix64(v+golden)
	d.Words++
}

// Then is the digest of d's rows followed by o's.
func (d RowDigest) Then(o RowDigest) RowDigest {
	p, b := uint64(1), uint64(digestBase)
	for n := o.Words; n > 0; n >>= 1 {
		if n&1 == 1 {
			p *= b
		}
		b *= b
	}
	return RowDigest{Rows: d.Rows + o.Rows, Words: d.Words + o.Words, Sum: d.Sum*p + o.Sum}
}

// AddRow adds one row of the unit schema (uid, row, payload).
func (d *RowDigest) AddRow(uid int64, row int32, payload string) {
	d.addRow(uid, row, xxh3.HashString(payload))
}

// addRow is AddRow with the payload already hashed (one hash serves
// several digests of the same row).
func (d *RowDigest) addRow(uid int64, row int32, payloadHash uint64) {
	d.Rows++
	d.word(uint64(uid))
	d.word(uint64(uint32(row)))
	d.word(payloadHash)
}

// addChange is AddChange for a sidecar row.
func (d *RowDigest) addChange(c segment.CDCRow) { d.AddChange(c.Kind.String(), c.Identity, c.Order) }

// AddChange adds the CDC change of the row just added: its kind by name
// ("insert", "update", "delete"), identity and order token. A row without
// one adds nothing, so plain rows digest alike in CDC and plain files.
func (d *RowDigest) AddChange(kind string, identity []byte, order uint64) {
	d.word(xxh3.HashString(kind))
	d.word(xxh3.Hash(identity))
	d.word(order)
}

// AddBatch adds every row of a unit-schema batch (and its optional
// fields, shape.go), with its CDC rows when sidecar is not nil (sidecar
// rows align with the batch's rows).
func (d *RowDigest) AddBatch(b arrow.RecordBatch, sidecar []segment.CDCRow) error {
	cols, err := UnitColumns(b)
	if err != nil {
		return err
	}
	if sidecar != nil && len(sidecar) != cols.Len() {
		return fmt.Errorf("sidecar has %d rows, batch %d", len(sidecar), cols.Len())
	}
	for i := range cols.Len() {
		d.AddCols(cols, i)
		if sidecar != nil {
			c := sidecar[i]
			d.AddChange(c.Kind.String(), c.Identity, c.Order)
		}
	}
	return nil
}

// AddCols adds row i of cols: uid, row, payload and the optional fields.
func (d *RowDigest) AddCols(c Cols, i int) {
	d.AddRow(c.UID(i), c.Row(i), c.Payload(i))
	d.addOptional(c, i)
}

// Words that name an optional field's value in a digest, by type, so
// that a tag never digests like a score nor an integer like a float.
const (
	digestTag = 0x7461670000000000 + iota
	digestScoreInt
	digestScoreFloat
	digestZip
	digestPartition // a broker record's metadata (recordMeta)
	digestOffset
	digestSequence
	digestKey
)

// addOptional adds row i's optional fields, and its record metadata
// (recordMeta), that are not null. A null
// adds nothing, as an absent field does: a JSON line without the field
// and one with null decode alike.
func (d *RowDigest) addOptional(c Cols, i int) {
	if c.tags != nil && c.tags.IsValid(i) {
		d.word(digestTag)
		d.word(uint64(c.tags.Value(i)))
	}
	if c.zips != nil && c.zips.IsValid(i) {
		d.word(digestZip)
		d.word(xxh3.HashString(c.zips.Value(i)))
	}
	switch {
	case c.scoreInts != nil && c.scoreInts.IsValid(i):
		d.word(digestScoreInt)
		d.word(uint64(c.scoreInts.Value(i)))
	case c.scoreFloats != nil && c.scoreFloats.IsValid(i):
		d.word(digestScoreFloat)
		d.word(math.Float64bits(c.scoreFloats.Value(i)))
	}
	c.meta.addTo(d, i)
}

// Cols are a batch's uid, row and payload columns, and its optional tag,
// zip and score (shape.go), found by name: a unit sent as JSON lines comes
// back with its fields sorted by name and its row numbers as int64 (the
// HTTP source's inference), one sent as CSV in its header's order, one
// sent as Arrow in the unit schema's order and types. All digest alike.
type Cols struct {
	uids        *array.Int64
	rows32      *array.Int32
	rows64      *array.Int64
	payloads    *array.String
	tags        *array.Int64
	zips        *array.String
	scoreInts   *array.Int64
	scoreFloats *array.Float64
	meta        recordMeta // a broker source's metadata columns (broker_codec.go)
}

func (c Cols) Len() int             { return c.uids.Len() }
func (c Cols) UID(i int) int64      { return c.uids.Value(i) }
func (c Cols) Payload(i int) string { return c.payloads.Value(i) }
func (c Cols) Row(i int) int32 {
	if c.rows32 != nil {
		return c.rows32.Value(i)
	}
	return int32(c.rows64.Value(i))
}

// UnitColumns returns a batch's uid, row and payload columns, and its
// optional fields. Any other column is an error, except a destination's
// CDC columns (_cdc_…), which the caller reads: a column the world never
// produced must not pass unseen.
func UnitColumns(b arrow.RecordBatch) (Cols, error) {
	var c Cols
	var ok1, ok2, ok3 bool
	for i, f := range b.Schema().Fields() {
		col := b.Column(i)
		ok := true
		switch f.Name {
		case "uid":
			c.uids, ok1 = col.(*array.Int64)
		case "payload":
			c.payloads, ok3 = col.(*array.String)
		case "row":
			ok2 = c.setRows(col)
		case fieldTag:
			c.tags, ok = col.(*array.Int64)
		case fieldZip:
			c.zips, ok = col.(*array.String)
		case fieldScore:
			c.scoreInts, _ = col.(*array.Int64)
			c.scoreFloats, _ = col.(*array.Float64)
			ok = c.scoreInts != nil || c.scoreFloats != nil
		default:
			ok = strings.HasPrefix(f.Name, "_cdc_") || c.meta.set(f.Name, col)
		}
		if !ok {
			return Cols{}, fmt.Errorf("batch column %s: not one the world produces (schema %v)", f, b.Schema())
		}
	}
	if !ok1 || !ok2 || !ok3 {
		return Cols{}, fmt.Errorf("batch columns %v are not uid int64, row int32 or int64, payload utf8", b.Schema())
	}
	if err := c.meta.check(c.uids); err != nil {
		return Cols{}, err
	}
	if c.rows64 != nil {
		for i := range c.rows64.Len() {
			if v := c.rows64.Value(i); v < 0 || v > 1<<31-1 {
				return Cols{}, fmt.Errorf("row number %d does not fit int32", v)
			}
		}
	}
	return c, nil
}

// setRows takes the row column: int32 (Arrow, Parquet) or int64 (the
// inference of JSON lines and CSV).
func (c *Cols) setRows(col arrow.Array) bool {
	switch r := col.(type) {
	case *array.Int32:
		c.rows32 = r
	case *array.Int64:
		c.rows64 = r
	default:
		return false
	}
	return true
}
