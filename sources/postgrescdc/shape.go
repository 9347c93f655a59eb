package postgrescdc

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
)

// shape is a table's columns as the source turns them into Arrow: one
// nullable field per column in column order, and which columns make the
// identity. The stream makes one from each Relation message, the
// snapshot from the catalog; the same columns give equal shapes.
//
// INVARIANT: len(names) == len(kinds) == schema's field count; key is
// ascending, non-empty, and indexes names.
type shape struct {
	names  []string
	kinds  []colKind
	key    []int
	schema *arrow.Schema
	fp     segment.SchemaFingerprint
}

// column is what a shape needs of one table column.
type column struct {
	name   string
	typOID uint32
}

// newShape returns the shape of cols whose identity is the columns named
// in keyNames (any order), or an error of the stream naming a key column
// the table does not have.
func newShape(table tableName, cols []column, keyNames []string) (*shape, error) {
	if len(keyNames) == 0 {
		return nil, streamf("table %s: no key columns (a primary key or a REPLICA IDENTITY USING INDEX)", table)
	}
	s := &shape{names: make([]string, len(cols)), kinds: make([]colKind, len(cols))}
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		s.names[i], s.kinds[i] = c.name, kindOf(c.typOID)
		fields[i] = arrow.Field{Name: c.name, Type: s.kinds[i].arrowType(), Nullable: true}
		if slices.Contains(keyNames, c.name) {
			s.key = append(s.key, i)
		}
	}
	if len(s.key) != len(keyNames) {
		return nil, streamf("table %s: key columns %v, but the columns are %v", table, keyNames, s.names)
	}
	s.schema = arrow.NewSchema(fields, nil)
	s.fp = segment.FingerprintOf(s.schema)
	return s, nil
}

// equal reports whether rows of s and o can share a chunk.
func (s *shape) equal(o *shape) bool {
	return s == o || (s.fp == o.fp && s.schema.Equal(o.schema) && slices.Equal(s.key, o.key))
}

// keyNames returns the names of s's key columns, in column order.
func (s *shape) keyNames() []string {
	out := make([]string, len(s.key))
	for i, k := range s.key {
		out[i] = s.names[k]
	}
	return out
}

// identity returns the identity of a row of s (values by column, nil
// for NULL).
func (s *shape) identity(table tableName, values [][]byte) ([]byte, error) {
	keyValues := make([][]byte, len(s.key))
	for i, k := range s.key {
		keyValues[i] = values[k]
	}
	return appendIdentity(nil, table, s.keyNames(), keyValues)
}

// row is one change: its CDC metadata and its values by column (nil for
// NULL), in text form.
type row struct {
	cdc    segment.CDCRow
	values [][]byte
}

// bytes is what a row counts against the chunk and buffer limits.
func (r row) bytes() int64 {
	n := int64(len(r.cdc.Identity))
	for _, v := range r.values {
		n += int64(len(v))
	}
	return n
}

// buildBatch turns rows of shape s into one record batch and its
// sidecar rows. A value that is not its type's text form, or has no
// Arrow value, is an error of the stream naming the column.
func buildBatch(alloc memory.Allocator, table tableName, s *shape, rows []row) (arrow.RecordBatch, []segment.CDCRow, error) {
	b := array.NewRecordBuilder(alloc, s.schema)
	defer b.Release()
	b.Reserve(len(rows))
	cdc := make([]segment.CDCRow, len(rows))
	for i, r := range rows {
		if len(r.values) != len(s.names) {
			panic(fmt.Sprintf("postgrescdc: a row of %d values for %d columns", len(r.values), len(s.names)))
		}
		for c, v := range r.values {
			if err := appendText(b.Field(c), s.kinds[c], v); err != nil {
				return nil, nil, streamf("table %s column %q (%s): value %.40q: %v",
					table, s.names[c], s.kinds[c].arrowType(), v, err)
			}
		}
		cdc[i] = r.cdc
	}
	return b.NewRecordBatch(), cdc, nil
}
