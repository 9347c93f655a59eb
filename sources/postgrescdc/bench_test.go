package postgrescdc

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkStream measures the stream alone: b.N rows inserted in
// transactions of 5 000, then updated, while the source is stopped; then
// the time for a source with the default batching to have every change
// acked by a host on the disk WAL. The server decodes in the same time.
//
//	go test ./sources/postgrescdc/ -run '^$' -bench Stream -benchtime 200000x
func BenchmarkStream(b *testing.B) {
	e := newPGEnv(b)
	e.exec(`CREATE TABLE m (id int8 PRIMARY KEY, name text, qty int4, price numeric(12,2), at timestamptz)`)
	l := newLake(b)
	h := l.start(b)
	cfg := e.config("public.m")
	cfg.UnitRows, cfg.ChunkRows, cfg.FlushInterval = 0, 0, 0 // the defaults
	r := startOn(b, cfg, h, nil)
	waitFor(b, 10*time.Second, "the stream", func() bool { return r.src.Stats().ConfirmedLSN > 0 })
	if err := r.stop(b); err != nil {
		b.Fatal(err)
	}
	n := b.N
	for from := 1; from <= n; from += 5000 {
		to := min(from+4999, n)
		e.exec(fmt.Sprintf(`INSERT INTO m SELECT g, 'name ' || g, g %% 100, g * 0.01, now() FROM generate_series(%d, %d) g`, from, to))
		e.exec(fmt.Sprintf(`UPDATE m SET qty = qty + 1 WHERE id BETWEEN %d AND %d`, from, to))
	}
	b.ResetTimer()
	start := time.Now()
	r2 := startOn(b, cfg, h, nil)
	src2 := r2.src
	waitFor(b, 10*time.Minute, "every change", func() bool { return src2.Stats().Changes == uint64(2*n) })
	elapsed := time.Since(start)
	b.StopTimer()
	if err := r2.stop(b); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(2*n)/elapsed.Seconds(), "changes/s")
	b.ReportMetric(float64(src2.Stats().Units), "units")
}
