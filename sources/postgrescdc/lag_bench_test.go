package postgrescdc

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/diskstore"
	"github.com/skipprd/skipprd/internal/pgtest"
	"github.com/skipprd/skipprd/sinks"
	"github.com/skipprd/skipprd/sinks/postgres"
	"github.com/skipprd/skipprd/storage"
)

// lagEvery is the steady workload: one single-row transaction every
// lagEvery.
const lagEvery = 5 * time.Millisecond

// BenchmarkEndToEndLag measures the lag from a source commit to the
// destination commit of that change: a steady workload of b.N
// single-row transactions (200/s) captured by the source, committed to
// a host's disk WAL with the daemon's default engine settings, and
// applied by the Postgres sink into a second database. Lag is taken from
// the client's COMMIT returning to a poller (every 2 ms) seeing the row
// at the destination, so it overstates by up to a poll. Reported for the
// source's default flush interval and for a short one.
//
//	go test ./sources/postgrescdc/ -run '^$' -bench EndToEndLag -benchtime 1000x
func BenchmarkEndToEndLag(b *testing.B) {
	for _, flush := range []time.Duration{DefaultFlushInterval, 20 * time.Millisecond} {
		b.Run(fmt.Sprintf("flush=%v", flush), func(b *testing.B) { benchLag(b, flush) })
	}
}

func benchLag(b *testing.B, flush time.Duration) {
	e := newPGEnv(b)
	e.exec(`CREATE TABLE t (id int8 PRIMARY KEY, v text)`)
	dst := pgtest.Database(b)
	h := startPGHost(b, dst)
	cfg := e.config("public.t")
	cfg.UnitRows, cfg.ChunkRows, cfg.FlushInterval = 0, 0, flush
	r := startOn(b, cfg, h, nil)
	waitFor(b, 20*time.Second, "the stream", func() bool { return r.src.Stats().ConfirmedLSN > 0 })
	committed := make([]time.Time, b.N+1)
	var mu sync.Mutex
	b.ResetTimer()
	go func() {
		tick := time.NewTicker(lagEvery)
		defer tick.Stop()
		for i := 1; i <= b.N; i++ {
			<-tick.C
			e.exec(fmt.Sprintf("INSERT INTO t VALUES (%d, 'row %d')", i, i))
			mu.Lock()
			committed[i] = time.Now()
			mu.Unlock()
		}
	}()
	lags := pollLags(b, dst, committed, &mu)
	b.StopTimer()
	if err := r.stop(b); err != nil {
		b.Fatal(err)
	}
	slices.Sort(lags)
	b.ReportMetric(ms(lags[len(lags)/2]), "p50-ms")
	b.ReportMetric(ms(lags[len(lags)*99/100]), "p99-ms")
}

// pollLags polls the destination until every row arrived and returns
// each row's lag.
func pollLags(b *testing.B, dst string, committed []time.Time, mu *sync.Mutex) []time.Duration {
	ctx := context.Background()
	db, err := pgx.Connect(ctx, dst)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close(ctx)
	var lags []time.Duration
	seen := 0
	deadline := time.Now().Add(time.Duration(len(committed))*lagEvery + time.Minute)
	for seen < len(committed)-1 {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d rows at the destination after %v", seen, len(committed)-1, time.Minute)
		}
		var top int64
		if err := db.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM t").Scan(&top); err != nil {
			time.Sleep(2 * time.Millisecond) // the sink has not created the table yet
			continue
		}
		now := time.Now()
		mu.Lock()
		// A row can reach the destination before its client has seen
		// COMMIT return; it is counted at the next poll.
		for ; seen < int(top) && !committed[seen+1].IsZero(); seen++ {
			lags = append(lags, now.Sub(committed[seen+1]))
		}
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
	return lags
}

// startPGHost starts a host on the disk WAL with the daemon's default
// engine settings, whose sink is the Postgres database at dst.
func startPGHost(b *testing.B, dst string) *storage.Host {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	loop := storage.NewLoop()
	disk, err := storage.NewOSDisk(loop, b.TempDir(), storage.DiskOptions{})
	if err != nil {
		b.Fatal(err)
	}
	cfg := engine.DeriveConfig("wal", "lag", 8<<20, 2, engine.DefaultMaxDelay)
	cfg.Disk = engine.DefaultDiskWAL()
	cfg.FenceWait = 0
	db, err := postgres.OpenPGX(ctx, dst, postgres.PGXOptions{MaxConns: int32(cfg.CompactionConcurrency + 1)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)
	sink := postgres.NewSink(db, storage.NewWorkers(loop, cfg.CompactionConcurrency, time.Minute))
	h, err := storage.NewHost(cfg, loop, storage.HostPorts{
		Store: diskstore.New(disk, loop.Clock(), storage.NewRand(), "segments"), Disk: disk, Sinks: sinks.Set{testSink: sink},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(h.Kill)
	if err := h.Start(ctx); err != nil {
		b.Fatalf("host start: %v", err)
	}
	return h
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
