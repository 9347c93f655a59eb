package segment

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The benchmarks compare the segment path with writing and reading the
// same batches as plain Arrow IPC streams, in the same run:
//
//	go test ./engine/segment -run '^$' -bench . -benchmem
//
// BenchmarkEncode/segment vs BenchmarkEncode/arrow-ipc and
// BenchmarkDecode/segment vs BenchmarkDecode/arrow-ipc are the pairs; the
// segment side also hashes every byte (SHA-256) and writes the index and a
// CDC sidecar for one namespace; BenchmarkEncode/sha256-only hashes the
// body alone, so the run shows how much of the difference is the checksum
// the format requires and how much is framing. BenchmarkReadIndex shows
// the index-only parse does not grow with payload bytes.

const benchBatchRows = 8192

var benchSchemas = []*arrow.Schema{
	eventsSchema, pageviewsSchema, ordersSchema,
	arrow.NewSchema([]arrow.Field{
		{Name: "session_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "user", Type: arrow.BinaryTypes.String},
		{Name: "started_at", Type: &arrow.TimestampType{Unit: arrow.Millisecond}},
		{Name: "seconds", Type: arrow.PrimitiveTypes.Float64},
	}, nil),
	arrow.NewSchema([]arrow.Field{
		{Name: "sku", Type: arrow.BinaryTypes.String},
		{Name: "warehouse", Type: arrow.PrimitiveTypes.Int32},
		{Name: "on_hand", Type: arrow.PrimitiveTypes.Int64},
	}, nil),
	arrow.NewSchema([]arrow.Field{
		{Name: "metric", Type: arrow.BinaryTypes.String},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64},
		{Name: "labels", Type: arrow.ListOf(arrow.BinaryTypes.String)},
	}, nil),
}

// benchNamespaces and their share of the payload: one busy stream, a
// trickle, a small CDC snapshot, and three middling ones.
var benchNamespaces = []struct {
	name  string
	share float64
	cdc   bool
}{{"events", 0.50, false}, {"pageviews", 0.02, false}, {"orders", 0.03, true},
	{"sessions", 0.15, false}, {"inventory", 0.10, false}, {"metrics", 0.20, false}}

type benchSet struct {
	parts   []Part
	streams [][]byte // plain IPC stream per part, for the baseline decode
	body    []byte
	bytes   int64 // total plain IPC bytes
}

var (
	benchOnce  sync.Map // size → *benchSet
	benchBuild sync.Mutex
)

// benchData builds (once per size) six namespaces totalling about
// targetBytes of Arrow IPC.
func benchData(b *testing.B, targetBytes int64) *benchSet {
	benchBuild.Lock()
	defer benchBuild.Unlock()
	if s, ok := benchOnce.Load(targetBytes); ok {
		return s.(*benchSet)
	}
	set := &benchSet{}
	for i, ns := range benchNamespaces {
		p := Part{Key: PartitionKey{SinkRef: "lake", Namespace: ns.name, Partition: "0", Schema: FingerprintOf(benchSchemas[i])},
			Schema: benchSchemas[i]}
		want := int64(float64(targetBytes) * ns.share)
		var stream bytes.Buffer
		for seq := 0; int64(stream.Len()) < want; seq++ {
			p.Batches = append(p.Batches, benchBatch(benchSchemas[i], seq))
			stream.Reset()
			if err := writeIPC(&stream, p, memory.DefaultAllocator); err != nil {
				b.Fatal(err)
			}
		}
		if ns.cdc {
			p.Sidecar = benchSidecar(rowsOf(p.Batches))
		}
		set.parts = append(set.parts, p)
		set.streams = append(set.streams, bytes.Clone(stream.Bytes()))
		set.bytes += int64(stream.Len())
	}
	var body bytes.Buffer
	if _, err := Encode(&body, 0, nil, set.parts, nil); err != nil {
		b.Fatal(err)
	}
	set.body = body.Bytes()
	benchOnce.Store(targetBytes, set)
	return set
}

// benchBatch fills one batch with deterministic, varied values.
func benchBatch(s *arrow.Schema, seq int) arrow.RecordBatch {
	bld := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer bld.Release()
	for r := range benchBatchRows {
		v := seq*benchBatchRows + r
		for i, f := range s.Fields() {
			appendBenchValue(bld.Field(i), f.Type, v)
		}
	}
	return bld.NewRecordBatch()
}

func appendBenchValue(b array.Builder, dt arrow.DataType, v int) {
	switch b := b.(type) {
	case *array.Int64Builder:
		b.Append(int64(v) * 7919)
	case *array.Int32Builder:
		b.Append(int32(v % 97))
	case *array.Float64Builder:
		b.Append(float64(v) * 0.25)
	case *array.StringBuilder:
		b.Append(fmt.Sprintf("value-%d-%x", v%1000, v))
	case *array.BinaryBuilder:
		b.Append([]byte(fmt.Sprintf("payload-%08d", v)))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(int64(v) * 1000))
	case *array.ListBuilder:
		b.Append(true)
		vb := b.ValueBuilder()
		for j := range v % 3 {
			appendBenchValue(vb, dt.(*arrow.ListType).Elem(), v+j)
		}
	default:
		panic(fmt.Sprintf("bench: no value for %T", b))
	}
}

func benchSidecar(rows int64) *Sidecar {
	s := &Sidecar{Rows: make([]CDCRow, rows)}
	for i := range s.Rows {
		s.Rows[i] = CDCRow{Kind: Insert, Identity: fmt.Appendf(nil, "order:%d", i), Order: uint64(i)}
	}
	return s
}

func BenchmarkEncode(b *testing.B) {
	set := benchData(b, 64<<20)
	var buf bytes.Buffer
	buf.Grow(len(set.body))
	b.Run("segment", func(b *testing.B) {
		b.SetBytes(int64(len(set.body)))
		for b.Loop() {
			buf.Reset()
			if _, err := Encode(&buf, 0, nil, set.parts, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sha256-only", func(b *testing.B) {
		b.SetBytes(int64(len(set.body)))
		for b.Loop() {
			sha256.Sum256(set.body)
		}
	})
	b.Run("arrow-ipc", func(b *testing.B) {
		b.SetBytes(set.bytes)
		for b.Loop() {
			buf.Reset()
			for _, p := range set.parts {
				if err := writeIPC(&buf, p, memory.DefaultAllocator); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	set := benchData(b, 64<<20)
	b.Run("segment", func(b *testing.B) {
		b.SetBytes(int64(len(set.body)))
		for b.Loop() {
			body, err := OpenBody("bench", Bytes(set.body), int64(len(set.body)))
			if err != nil {
				b.Fatal(err)
			}
			for i := range body.Index.Entries {
				s, err := body.ReadSlice(SliceOrdinal(i), memory.DefaultAllocator)
				if err != nil {
					b.Fatal(err)
				}
				s.Release()
			}
		}
	})
	b.Run("arrow-ipc", func(b *testing.B) {
		b.SetBytes(set.bytes)
		for b.Loop() {
			for _, stream := range set.streams {
				if err := readIPC(stream); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// readIPC is the baseline: decode a stream and hold its batches, as a
// Slice does, then release them.
func readIPC(stream []byte) error {
	rd, err := ipc.NewReader(bytes.NewReader(stream))
	if err != nil {
		return err
	}
	defer rd.Release()
	var held []arrow.RecordBatch
	for rd.Next() {
		rec := rd.RecordBatch()
		rec.Retain()
		held = append(held, rec)
	}
	for _, r := range held {
		r.Release()
	}
	if err := rd.Err(); err != nil && err != io.EOF {
		return err
	}
	return nil
}

// BenchmarkReadIndex parses the index of a 4 MiB and a 64 MiB segment of
// the same six namespaces: the time should not follow the size.
func BenchmarkReadIndex(b *testing.B) {
	for _, size := range []int64{4 << 20, 64 << 20} {
		set := benchData(b, size)
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			for b.Loop() {
				if _, err := ReadIndex("bench", Bytes(set.body), int64(len(set.body))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
