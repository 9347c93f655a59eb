package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/internal/logbuf"
	httpsrc "github.com/skipprd/skipprd/sources/http"
)

// HTTP ingest through the real daemon (local-disk WAL, SYNC, Parquet
// lake under a temporary DATA_DIR) with 64 concurrent clients, beside a
// bare net/http handler that reads and discards the same bodies (the
// ceiling), in the same run. One op is one request of benchRows rows;
// the metrics are rows/s and the p50/p99 response time. For JSON lines,
// jsonl/decoder-all-cores decodes the same body with httpsrc.Decode on
// every core at once, no HTTP and no WAL: what decoding alone would let
// the daemon take in (issue 24 asks jsonl/daemon for 0.6× of it).
const (
	benchClients = 64
	benchRows    = 500
)

func BenchmarkHTTPIngest(b *testing.B) {
	jsonl, arrowBody := benchJSONL(), benchArrow(b)
	// First, while the daemon has no work: compaction of what the
	// daemon runs below ingested goes on after them.
	b.Run("jsonl/decoder-all-cores", func(b *testing.B) { benchDecodeAllCores(b, jsonl) })
	addr := startBenchDaemon(b)
	bare := startBare(b)
	for _, c := range []struct {
		name, addr, ctype string
		body              []byte
	}{
		{"jsonl/daemon", addr, "application/x-ndjson", jsonl},
		{"jsonl/bare", bare, "application/x-ndjson", jsonl},
		{"arrow/daemon", addr, "application/vnd.apache.arrow.stream", arrowBody},
		{"arrow/bare", bare, "application/vnd.apache.arrow.stream", arrowBody},
	} {
		b.Run(c.name, func(b *testing.B) { benchPost(b, c.addr, c.ctype, c.body) })
	}
}

// benchDecodeAllCores decodes body as JSON lines, as the daemon's
// handler does (default limits, the default allocator), from
// GOMAXPROCS goroutines at once. Its MB/s is all cores' together.
func benchDecodeAllCores(b *testing.B, body []byte) {
	lim := httpsrc.DefaultLimits()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			d, err := httpsrc.Decode(httpsrc.JSONLines, bytes.NewReader(body), lim, memory.DefaultAllocator)
			if err != nil {
				b.Error(err)
				return
			}
			d.Release()
		}
	})
	b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
}

// benchPost runs b.N requests from benchClients clients, each with a
// key of its own.
func benchPost(b *testing.B, addr, ctype string, body []byte) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchClients}}
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	lat := postClosedLoop(b, client, addr, ctype, body, b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(percentileUs(lat, 0.5), "p50-µs")
	b.ReportMetric(percentileUs(lat, 0.99), "p99-µs")
}

// postClosedLoop posts body n times from benchClients clients, each
// request with a key of its own and sent once the client's previous
// one was answered 200, and returns the latencies, call to 200.
func postClosedLoop(b *testing.B, client *http.Client, addr, ctype string, body []byte, n int) []time.Duration {
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	run := fmt.Sprint(time.Now().UnixNano())
	var wg sync.WaitGroup
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				start := time.Now()
				postOK(b, client, addr, ctype, run+"-"+fmt.Sprint(i), body)
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return lat
}

// percentileUs is the q-quantile of d, in microseconds (0 if d is empty).
func percentileUs(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds())
}

func postOK(b *testing.B, client *http.Client, addr, ctype, key string, body []byte) {
	for {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/ingest/bench", bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			return
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			time.Sleep(10 * time.Millisecond) // backpressure: counted in the latency, as a client sees it
		default:
			b.Errorf("answered %d: %s", resp.StatusCode, msg)
			return
		}
	}
}

// startBenchDaemon runs the daemon in this process on a temporary
// DATA_DIR with an HTTP source on a free loopback port.
func startBenchDaemon(b *testing.B) string {
	dir := b.TempDir()
	pipeline := filepath.Join(dir, "skipprd.yaml")
	if err := writeText(pipeline, "sinks:\n  lake: {kind: parquet-dir, path: lake}\n"+
		"sources:\n  - {name: api, kind: http, sink: lake, listen: \"127.0.0.1:0\"}\n"); err != nil {
		b.Fatal(err)
	}
	env := map[string]string{envDataDir: filepath.Join(dir, "data"), envPipelineFile: pipeline, envAdminAddr: "127.0.0.1:0"}
	var logs logbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, func(k string) string { return env[k] }, io.Discard, slog.New(slog.NewTextHandler(&logs, nil)))
	}()
	b.Cleanup(func() {
		cancel()
		if code := <-exited; code != 0 {
			b.Errorf("daemon exit %d:\n%s", code, logs.String())
		}
	})
	deadline := time.Now().Add(e2eWait)
	for time.Now().Before(deadline) {
		lines := strings.Split(logs.String(), "\n")
		if a := listenAddr(lines); a != "" && findLine(lines, "msg=ready") != "" {
			return a
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("daemon not ready:\n%s", logs.String())
	return ""
}

// startBare serves a handler that reads and discards bodies: the ceiling
// of HTTP on this machine.
func startBare(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"bytes\":%d}\n", n)
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func benchJSONL() []byte {
	var buf bytes.Buffer
	for r := range benchRows {
		fmt.Fprintf(&buf, `{"id":%d,"user":"user-%05d","amount":%d.%02d,"ok":%t,"at":"2026-12-01T10:%02d:%02dZ"}`+"\n",
			r, r*7919%100000, r%1000, r%100, r%3 == 0, r/60%60, r%60)
	}
	return buf.Bytes()
}

func benchArrow(b *testing.B) []byte {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "user", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer bld.Release()
	for r := range benchRows {
		bld.Field(0).(*array.Int64Builder).Append(int64(r))
		bld.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("user-%05d", r*7919%100000))
		bld.Field(2).(*array.Float64Builder).Append(float64(r%1000) + float64(r%100)/100)
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

func writeText(path, text string) error { return os.WriteFile(path, []byte(text), 0o644) }
