package main

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/internal/brokertest"
)

const (
	kafkaBenchRecords    = 200_000
	kafkaBenchPartitions = 4
	kafkaLagRate         = 2000             // records/s
	kafkaLagFor          = 10 * time.Second // of producing
	kafkaLagPoll         = 50 * time.Millisecond
	kafkaBenchFlush      = "1s" // the sink's flush_interval: the least allowed
)

// The Kafka source through the real daemon (in process, the default
// local-disk WAL, a Parquet lake with flush_interval 1s) on a one-broker
// kfake cluster, a topic of four partitions of JSON values of about 200
// bytes.
//
// throughput/daemon: kafkaBenchRecords records produced beforehand,
// timed from the daemon's start to skipprd_rows_acked_total of their
// namespace reaching them (acked: durable in the WAL; the lake is
// written after). throughput/bare: a bare franz-go loop consuming the
// same partitions from the start and only counting, in the same run.
//
// lag: the daemon running, a producer sends kafkaLagRate records/s for
// kafkaLagFor, each value holding its send time; the lake directory is
// polled every 50 ms and each record's lag is the time its row was
// first seen in a Parquet file minus its send time: produce to
// queryable in the lake, dominated by flush_interval. p50/p99 in ms.
func BenchmarkKafkaEndToEnd(b *testing.B) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(kafkaBenchPartitions, "events", "lagged"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	total := brokertest.ProduceEvents(b, c.ListenAddrs(), "events", kafkaBenchRecords)
	b.Run("throughput/bare", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			bareConsume(b, c, "events", kafkaBenchRecords)
		}
		b.ReportMetric(float64(kafkaBenchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("throughput/daemon", func(b *testing.B) {
		b.SetBytes(total)
		for b.Loop() {
			d := startKafkaBenchDaemon(b, c, "events")
			d.waitAcked(b, "events", kafkaBenchRecords)
			b.StopTimer()
			d.stop(b)
			b.StartTimer()
		}
		b.ReportMetric(float64(kafkaBenchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("lag", func(b *testing.B) {
		// One run whatever b.N: it takes kafkaLagFor and more, so the
		// framework asks for no second.
		benchKafkaLag(b, c, "lagged")
	})
}

// bareConsume reads n records of topic's partitions from their start
// with a bare franz-go client, only counting them.
func bareConsume(b *testing.B, c *kfake.Cluster, topic string, n int) {
	parts := map[int32]kgo.Offset{}
	for p := range int32(kafkaBenchPartitions) {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			b.Fatalf("%d records of %d: %v", got, n, err)
		}
		got += fs.NumRecords()
	}
}

// startKafkaBenchDaemon runs the daemon on a fresh DATA_DIR with a
// Kafka source reading topic into a Parquet lake.
func startKafkaBenchDaemon(b *testing.B, c *kfake.Cluster, topic string) *benchDaemon {
	b.Helper()
	return startBenchDaemonWith(b, func(lake string) string {
		return "sinks:\n  lake: {kind: parquet-dir, path: " + lake + ", flush_interval: " + kafkaBenchFlush + "}\nsources:\n" +
			"  - {name: events, kind: kafka, brokers: [" + strings.Join(c.ListenAddrs(), ", ") + "], topics: [" + topic + "], sink: lake}\n"
	}, nil)
}

// benchKafkaLag runs the daemon on topic (empty), produces
// kafkaLagRate records/s into it for kafkaLagFor, each value holding
// its sequence number ("aid") and send time ("sent_ns", unix nanos), and
// polls the lake until every record's row is in it.
func benchKafkaLag(b *testing.B, c *kfake.Cluster, topic string) {
	d := startKafkaBenchDaemon(b, c, topic)
	deadline := time.Now().Add(time.Minute)
	for findLine(strings.Split(d.logs.String(), "\n"), "msg=ready") == "" {
		if time.Now().After(deadline) {
			b.Fatalf("daemon not ready:\n%s", d.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	n := kafkaLagRate * int(kafkaLagFor/time.Second)
	sent := make([]int64, n) // unix nanos, by aid
	var produceErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Producing: a tick every 10 ms, each sending the records due by then.
	wg.Go(func() {
		start := time.Now()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < n; {
			due := min(n, int(time.Since(start).Seconds()*kafkaLagRate)+1)
			for ; i < due; i++ {
				now := time.Now().UnixNano()
				sent[i] = now
				v := fmt.Appendf(nil, `{"aid":"%07d","sent_ns":%d,"user":"user-%d","event":"page_view","amount":%d.5,"note":"a row of about two hundred bytes, as a webhook or a click event is"}`,
					i, now, i%977, i%101)
				cl.Produce(context.Background(), &kgo.Record{Topic: topic, Value: v}, func(_ *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						produceErr = err
						mu.Unlock()
					}
				})
			}
			<-tick.C
		}
	})
	seen := make([]int64, n) // unix nanos first seen in the lake, by aid
	read := map[string]bool{}
	found := 0
	var readErr error
	wait := time.Now().Add(kafkaLagFor + time.Minute)
	for found < n && time.Now().Before(wait) {
		time.Sleep(kafkaLagPoll)
		now := time.Now().UnixNano()
		for _, path := range kafkaLakeFiles(d.lake) {
			if read[path] {
				continue
			}
			ids, err := readAIDs(path)
			if err != nil {
				readErr = err // compacted away since listed (its rows are in another file), or unreadable
				continue
			}
			read[path] = true
			for _, id := range ids {
				i, err := strconv.Atoi(id)
				if err != nil || i < 0 || i >= n {
					b.Fatalf("%s: aid %q", path, id)
				}
				if seen[i] == 0 {
					seen[i] = now
					found++
				}
			}
		}
	}
	wg.Wait()
	if err := cl.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if produceErr != nil {
		b.Fatal(produceErr)
	}
	if found < n {
		b.Fatalf("%d of %d records in the lake a minute after the last was sent (last read error: %v)", found, n, readErr)
	}
	lags := make([]time.Duration, n)
	for i := range n {
		lags[i] = time.Duration(seen[i] - sent[i])
	}
	slices.Sort(lags)
	ms := func(q float64) float64 { return float64(lags[min(n-1, int(q*float64(n)))]) / 1e6 }
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(float64(lags[n-1])/1e6, "max-ms")
	b.ReportMetric(float64(lags[0])/1e6, "min-ms")
}

// kafkaLakeFiles lists the Parquet files under lake (a file is renamed to
// .parquet once whole).
func kafkaLakeFiles(lake string) []string {
	var out []string
	_ = filepath.WalkDir(lake, func(path string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && strings.HasSuffix(path, ".parquet") {
			out = append(out, path)
		}
		return nil
	})
	return out
}

// readAIDs reads the column aid of a Parquet file.
func readAIDs(path string) ([]string, error) {
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		return nil, err
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		return nil, err
	}
	defer tbl.Release()
	idx := tbl.Schema().FieldIndices("aid")
	if len(idx) != 1 {
		return nil, fmt.Errorf("%s: no column aid in %s", path, tbl.Schema())
	}
	var out []string
	for _, chunk := range tbl.Column(idx[0]).Data().Chunks() {
		s, ok := chunk.(*array.String)
		if !ok {
			return nil, fmt.Errorf("%s: aid is %s", path, chunk.DataType())
		}
		for i := range s.Len() {
			out = append(out, s.Value(i))
		}
	}
	return out, nil
}
