package sim

import (
	"fmt"

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
type RowDigest struct {
	Rows int
	Sum  uint64
}

func (d *RowDigest) word(v uint64) { d.Sum = mix64(d.Sum ^ v + golden) }

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

// AddBatch adds every row of a unit-schema batch, with its CDC rows when
// sidecar is not nil (sidecar rows align with the batch's rows).
func (d *RowDigest) AddBatch(b arrow.RecordBatch, sidecar []segment.CDCRow) error {
	cols, err := UnitColumns(b)
	if err != nil {
		return err
	}
	if sidecar != nil && len(sidecar) != cols.Len() {
		return fmt.Errorf("sidecar has %d rows, batch %d", len(sidecar), cols.Len())
	}
	for i := range cols.Len() {
		d.AddRow(cols.UID(i), cols.Row(i), cols.Payload(i))
		if sidecar != nil {
			c := sidecar[i]
			d.AddChange(c.Kind.String(), c.Identity, c.Order)
		}
	}
	return nil
}

// Cols are a batch's uid, row and payload columns, found by name: a unit
// sent as JSON lines comes back with its fields sorted by name and its
// row numbers as int64 (the HTTP source's inference), one sent as Arrow
// in the unit schema's order and types. Both digest alike.
type Cols struct {
	uids     *array.Int64
	rows32   *array.Int32
	rows64   *array.Int64
	payloads *array.String
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

// UnitColumns returns a batch's uid, row and payload columns.
func UnitColumns(b arrow.RecordBatch) (Cols, error) {
	col := func(name string) arrow.Array {
		if idx := b.Schema().FieldIndices(name); len(idx) == 1 {
			return b.Column(idx[0])
		}
		return nil
	}
	var c Cols
	var ok1, ok2, ok3 bool
	c.uids, ok1 = col("uid").(*array.Int64)
	c.payloads, ok3 = col("payload").(*array.String)
	switch r := col("row").(type) {
	case *array.Int32:
		c.rows32, ok2 = r, true
	case *array.Int64:
		c.rows64, ok2 = r, true
		for i := range r.Len() {
			if v := r.Value(i); v < 0 || v > 1<<31-1 {
				return Cols{}, fmt.Errorf("row number %d does not fit int32", v)
			}
		}
	}
	if !ok1 || !ok2 || !ok3 {
		return Cols{}, fmt.Errorf("batch columns %v are not uid int64, row int32 or int64, payload utf8", b.Schema())
	}
	return c, nil
}
