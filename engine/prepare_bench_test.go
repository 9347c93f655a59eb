package engine_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// BenchmarkPrepareUnit is the disk WAL's per-unit encoding (the host runs
// it on the submitting goroutine): one row of a 1 KiB payload and two
// small columns, the unit of the group-commit benchmark.
func BenchmarkPrepareUnit(b *testing.B) {
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "uid", Type: arrow.BinaryTypes.String},
		{Name: "ord", Type: arrow.PrimitiveTypes.Int64},
		{Name: "payload", Type: arrow.BinaryTypes.Binary},
	}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	rb.Field(0).(*array.StringBuilder).Append("w00")
	rb.Field(1).(*array.Int64Builder).Append(1)
	rb.Field(2).(*array.BinaryBuilder).Append(make([]byte, 1024))
	rec := rb.NewRecordBatch()
	rb.Release()
	defer rec.Release()
	u := engine.Unit{
		Key:    segment.PartitionKey{SinkRef: "lake", Namespace: "ns", Schema: segment.FingerprintOf(sch)},
		Schema: sch, Batches: []arrow.RecordBatch{rec},
	}
	b.ReportAllocs()
	for b.Loop() {
		p, err := engine.PrepareUnit(u)
		if err != nil {
			b.Fatal(err)
		}
		for _, x := range p.Batches {
			x.Release()
		}
	}
}
