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
	uids, rows, payloads, err := unitColumns(b)
	if err != nil {
		return err
	}
	if sidecar != nil && len(sidecar) != uids.Len() {
		return fmt.Errorf("sidecar has %d rows, batch %d", len(sidecar), uids.Len())
	}
	for i := range uids.Len() {
		d.AddRow(uids.Value(i), rows.Value(i), payloads.Value(i))
		if sidecar != nil {
			c := sidecar[i]
			d.AddChange(c.Kind.String(), c.Identity, c.Order)
		}
	}
	return nil
}

// unitColumns returns a batch's uid, row and payload columns.
func unitColumns(b arrow.RecordBatch) (*array.Int64, *array.Int32, *array.String, error) {
	if b.NumCols() < 3 {
		return nil, nil, nil, fmt.Errorf("batch has %d columns, want uid, row, payload", b.NumCols())
	}
	uids, ok1 := b.Column(0).(*array.Int64)
	rows, ok2 := b.Column(1).(*array.Int32)
	payloads, ok3 := b.Column(2).(*array.String)
	if !ok1 || !ok2 || !ok3 {
		return nil, nil, nil, fmt.Errorf("batch columns %v are not uid int64, row int32, payload utf8", b.Schema())
	}
	return uids, rows, payloads, nil
}
