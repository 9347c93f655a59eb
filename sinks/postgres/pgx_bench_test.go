package postgres

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/internal/pgtest"
	"github.com/skipprd/skipprd/internal/pgurl"
)

// The benchmark job: benchRows rows of six columns in batches of
// benchBatchRows, like a compaction job of a small event table.
const (
	benchRows      = 100_000
	benchBatchRows = 10_000
)

var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "qty", Type: arrow.PrimitiveTypes.Int32},
	{Name: "price", Type: arrow.PrimitiveTypes.Float64},
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

// benchRow is row r's values, as the Arrow batches and the baseline's Go
// rows both hold them.
func benchRow(r int) (id int64, qty int32, price float64, name string, ok bool, atMicros int64) {
	return int64(r) * 7919, int32(r % 1000), float64(r) / 8, fmt.Sprintf("customer-%07d", r), r%3 == 0, 1_700_000_000_000_000 + int64(r)*1_000
}

func benchBatches() []arrow.RecordBatch {
	var out []arrow.RecordBatch
	rb := array.NewRecordBuilder(memory.DefaultAllocator, benchSchema)
	defer rb.Release()
	for start := 0; start < benchRows; start += benchBatchRows {
		for r := start; r < start+benchBatchRows; r++ {
			id, qty, price, name, ok, at := benchRow(r)
			rb.Field(0).(*array.Int64Builder).Append(id)
			rb.Field(1).(*array.Int32Builder).Append(qty)
			rb.Field(2).(*array.Float64Builder).Append(price)
			rb.Field(3).(*array.StringBuilder).Append(name)
			rb.Field(4).(*array.BooleanBuilder).Append(ok)
			rb.Field(5).(*array.TimestampBuilder).Append(arrow.Timestamp(at))
		}
		out = append(out, rb.NewRecordBatch())
	}
	return out
}

// benchJobSeq numbers benchmark jobs: an id used twice would be a replay
// that writes nothing.
var benchJobSeq atomic.Int64

// BenchmarkPGXApply: rows/s of a plain job through the sink (a whole
// Apply: its transaction, applied-jobs row, column check, COPY from the
// Arrow batches) against pgx's CopyFrom of the same rows, already Go
// values, into a bare table (the baseline); and of a CDC job (COPY into
// the staging table, then the upsert) updating 100k identities.
func BenchmarkPGXApply(b *testing.B) {
	s := benchServer(b)
	batches := benchBatches()
	b.Run("sink", func(b *testing.B) {
		for b.Loop() {
			s.mustApply(b, plainJob(fmt.Sprint("bench-", benchJobSeq.Add(1)), "bench_sink", batches...))
		}
		b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("pgx-copy", func(b *testing.B) {
		benchCopyBaseline(b, s)
	})
	b.Run("cdc", func(b *testing.B) {
		for b.Loop() {
			order := uint64(benchJobSeq.Add(1))
			changes := make([]segment.CDCRow, benchRows)
			for r := range changes {
				changes[r] = segment.CDCRow{Kind: segment.Update, Identity: fmt.Appendf(nil, "k%07d", r), Order: order}
			}
			s.mustApply(b, cdcJob(fmt.Sprint("bench-", order), "bench_cdc", changes, batches...))
		}
		b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// benchCopyBaseline copies the benchmark rows with pgx alone.
func benchCopyBaseline(b *testing.B, s *server) {
	ctx := ctxT(b)
	if _, err := s.conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_copy (id bigint, qty integer, price double precision,
		name text, ok boolean, at timestamp with time zone)`); err != nil {
		b.Fatal(err)
	}
	rows := make([][]any, benchRows)
	for r := range rows {
		id, qty, price, name, ok, at := benchRow(r)
		rows[r] = []any{id, qty, price, name, ok, time.UnixMicro(at).UTC()}
	}
	cols := []string{"id", "qty", "price", "name", "ok", "at"}
	for b.Loop() {
		n, err := s.conn.CopyFrom(ctx, pgx.Identifier{"bench_copy"}, cols, pgx.CopyFromRows(rows))
		if err != nil || n != benchRows {
			b.Fatalf("CopyFrom: %d rows, %v", n, err)
		}
	}
	b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// benchServer is newServer for a benchmark. go test prints a skipped
// benchmark's reason only under -v, so the skip is also said on stderr.
func benchServer(b *testing.B) *server {
	b.Helper()
	defer func() {
		if b.Skipped() {
			fmt.Fprintf(os.Stderr, "SKIPPING %s: PostgreSQL at %s does not answer; start it or set SKIPPR_TEST_PG_URL (-v shows why)\n",
				b.Name(), pgurl.Redact(pgtest.ServerURL()))
		}
	}()
	return newServer(b, 2)
}
