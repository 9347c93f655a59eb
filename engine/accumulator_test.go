package engine

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
)

var testSchema = arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)

func testUnit(ns string, vals ...int64) Unit {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues(vals, nil)
	col := b.NewArray()
	rec := array.NewRecordBatch(testSchema, []arrow.Array{col}, int64(len(vals)))
	col.Release()
	key := segment.PartitionKey{SinkRef: "s", Namespace: ns, Schema: segment.FingerprintOf(testSchema)}
	return Unit{Key: key, Schema: testSchema, Batches: []arrow.RecordBatch{rec},
		Offsets: segment.Offsets{{Key: ns, Value: uint64(vals[len(vals)-1])}}}
}

func values(p *livePart) (out []int64) {
	for _, b := range p.batches {
		out = append(out, b.Column(0).(*array.Int64).Int64Values()...)
	}
	return out
}

// A failed snapshot's content goes back ahead of newer content, key by
// key, so order within a partition survives a persist failure.
func TestPrependKeepsPartitionOrder(t *testing.T) {
	older, newer := newBatchSet(), newBatchSet()
	for _, in := range []Unit{testUnit("a", 1, 2), testUnit("b", 10)} {
		older.add(&unit{bytes: unitBytes(in)}, in)
	}
	for _, in := range []Unit{testUnit("c", 100), testUnit("a", 3), testUnit("b", 11)} {
		newer.add(&unit{bytes: unitBytes(in)}, in)
	}
	wantBytes := older.bytes + newer.bytes
	newer.prepend(older)
	for i, c := range []struct {
		ns   string
		want []int64
	}{{"a", []int64{1, 2, 3}}, {"b", []int64{10, 11}}, {"c", []int64{100}}} {
		ns, want := c.ns, c.want
		p := newer.parts[i]
		if p.key.Namespace != ns {
			t.Fatalf("part %d is %s, want %s", i, p.key.Namespace, ns)
		}
		if got := values(p); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", ns, got, want)
		}
		if p.rows != int64(len(want)) {
			t.Errorf("%s: rows %d, want %d", ns, p.rows, len(want))
		}
	}
	if newer.bytes != wantBytes || len(newer.units) != 5 {
		t.Fatalf("bytes %d units %d", newer.bytes, len(newer.units))
	}
	if v, _ := newer.offsets.Get("a"); v != 3 {
		t.Fatalf("offsets not max-merged: a=%d", v)
	}
}
