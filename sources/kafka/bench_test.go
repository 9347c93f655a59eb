package kafka

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/brokertest"
)

const (
	benchRecords    = 100_000
	benchPartitions = 4
)

// benchCluster is a kfake cluster holding benchRecords JSON records of
// about 200 bytes over benchPartitions partitions, and their bytes.
func benchCluster(b *testing.B) (*kfake.Cluster, int64) {
	b.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(benchPartitions, "events"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	total := brokertest.ProduceEvents(b, c.ListenAddrs(), "events", benchRecords)
	return c, total
}

// BenchmarkKafkaSource reads the topic through the source — fetching,
// JSON decoding into Arrow, units with their offsets — into a host that
// acks each unit at once, beside a bare franz-go loop that consumes the
// same partitions in the same run and only counts the records. The
// ratio is what turning records into units costs over fetching them.
func BenchmarkKafkaSource(b *testing.B) {
	c, bytes := benchCluster(b)
	b.Run("bare", func(b *testing.B) {
		b.SetBytes(bytes)
		for b.Loop() {
			benchBare(b, c)
		}
		b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("source", func(b *testing.B) {
		b.SetBytes(bytes)
		for b.Loop() {
			benchSource(b, c)
		}
		b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

func benchBare(b *testing.B, c *kfake.Cluster) {
	parts := map[int32]kgo.Offset{}
	for p := range int32(benchPartitions) {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"events": parts}))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	n := 0
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for n < benchRecords {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			b.Fatal(err)
		}
		n += fs.NumRecords()
	}
}

func benchSource(b *testing.B, c *kfake.Cluster) {
	src, err := New(Config{Name: "bench", Brokers: c.ListenAddrs(), Topics: []string{"events"}, SinkRef: "lake",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rows atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- src.Run(ctx, func(_ context.Context, u engine.Unit) error {
			for _, rec := range u.Batches {
				if rows.Add(rec.NumRows()) >= benchRecords {
					cancel()
				}
			}
			return nil
		}, nil)
	}()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if rows.Load() < benchRecords {
		b.Fatalf("%d rows of %d before the minute ran out", rows.Load(), benchRecords)
	}
}
