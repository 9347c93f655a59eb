package storage

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sinks"
)

// BenchmarkE2E measures the pipeline from ingest to Parquet against
// gofakes3 in process, through the real SDK client (path-style,
// WhenRequired checksums), with a baseline of the same store in the same
// run:
//
//   - pipeline: a Host with the production engine configuration for a
//     busy pipeline (engine.DeriveConfig with a 16 MiB buffer threshold:
//     TargetBytes 16 MiB, PartBytes 8 MiB, PartConcurrency 4,
//     CompactionConcurrency 8) and sinks.ParquetObjects (sink_ref "lake")
//     in the same bucket. 32 goroutines ingest 1 MiB units (one unit in
//     flight per offset key) round robin into six namespaces until
//     e2eIngestBytes are acked; the clock stops when every row is applied
//     to the lake and every segment reclaimed (Stats: RowsApplied covers
//     the rows acked, LiveSegments == 0). Start-up (recovery, its fence
//     wait) and the graceful Close are outside the timer.
//   - pipeline-spanning: the same, with the lake's jobs spanning segments
//     (e2eSpanning): fewer, larger files.
//   - wal-ingest: the WAL alone (no sink), timed from the first submit to
//     the last ack: what sources see of the S3 WAL (issue 24: ≥ 0.8× the
//     raw upload below).
//   - pipeline-floor: the least work of the pipeline's path for the same
//     rows, its steps timed apart and summed (wal_floor_bench_test.go):
//     the pipeline's target is half its MB/s.
//   - raw-multipart-upload: the same bytes written to a fresh store of the
//     same kind as 16 MiB objects (the segment size) of 8 MiB parts —
//     CreateMultipartUpload, UploadPart × 2, CompleteMultipartUpload —
//     with 4 parts in flight (the engine's PartConcurrency). This is what
//     the store can absorb in the WAL's own write pattern, with nothing
//     else to do; the pipeline writes every byte twice (segment body,
//     then Parquet) and reads it once (body GET, unless still cached).
//
//	go test ./storage -run '^$' -bench E2E -benchtime 1x
//
// Both report MB/s of ingest (b.SetBytes: Arrow buffer bytes of the
// units), records/s (for the baseline: the records those bytes carry),
// and requests per GiB counted at the HTTP transport: write-reqs/GiB (PUT,
// UploadPart, Create/CompleteMultipartUpload) and all-reqs/GiB (also GET,
// HEAD, LIST, DELETE). The pipeline adds lake-bytes/B (Parquet bytes per
// ingested byte). Payloads are hex text of random bytes, which zstd
// halves: between incompressible binary and repetitive JSON.
//
// Each iteration runs on a fresh store that it closes, so memory does not
// grow with b.N.

const (
	e2eIngestBytes    = 256 << 20
	e2eUnitBytes      = 1 << 20 // ≈ Arrow bytes of one unit
	e2eWriters        = 32      // Ingest callers, one unit in flight each
	e2ePoolUnits      = 48      // distinct batches, reused round robin (8 per namespace)
	e2ePayloadBytes   = 240     // hex characters per row
	e2eTargetBytes    = 16 << 20
	e2eRequestTimeout = 5 * time.Second
	e2eRawParts       = 4 // parts in flight in the baseline
	e2eDrainWait      = 5 * time.Minute
	e2eLakePrefix     = "lake"
)

func BenchmarkE2E(b *testing.B) {
	pool := newE2EPool()
	units := int((e2eIngestBytes + pool.unitBytes - 1) / pool.unitBytes)
	b.Run("pipeline", func(b *testing.B) { benchE2EPipeline(b, pool, units, engine.LaneLimits{}) })
	b.Run("pipeline-spanning", func(b *testing.B) { benchE2EPipeline(b, pool, units, e2eSpanning) })
	b.Run("wal-ingest", func(b *testing.B) { benchE2EIngest(b, pool, units) })
	b.Run("raw-multipart-upload", func(b *testing.B) { benchE2ERawUpload(b, pool, units) })
	b.Run("pipeline-floor", func(b *testing.B) { benchE2EFloor(b, pool, units) })
}

// e2eConfig is the engine's configuration in the end-to-end benchmarks.
func e2eConfig() engine.Config {
	cfg := engine.DeriveConfig("wal", "bench-e2e", e2eTargetBytes, e2eWriters, 0)
	cfg.FenceWait = e2eRequestTimeout + e2eRequestTimeout/4
	return cfg
}

// benchE2EIngest is wal-ingest: units submitted until every one is acked,
// on a host without sinks (nothing applied, nothing reclaimed).
func benchE2EIngest(b *testing.B, pool *e2ePool, units int) {
	b.SetBytes(int64(units) * pool.unitBytes)
	var tot e2eTotals
	for range b.N {
		b.StopTimer()
		client, counter, closeStore := e2eStore(b)
		cfg := e2eConfig()
		h := newWALHostWith(b, cfg, client, e2eRequestTimeout, nil)
		ctx := context.Background()
		if err := h.Start(ctx); err != nil {
			b.Fatal(err)
		}
		counter.reset()
		b.StartTimer()
		start := time.Now()
		e2eIngest(b, ctx, h, pool, units)
		elapsed := time.Since(start)
		b.StopTimer()
		st, err := h.Stats(ctx)
		if err != nil || st.PersistFailures > 0 || st.InDoubt > 0 {
			b.Fatalf("persist failures %d, in-doubt commits %d (%v)", st.PersistFailures, st.InDoubt, err)
		}
		b.Logf("%d units acked in %d segments (%.1f MiB each) in %v; a persist took %v on average (queue %d, parts in flight %d)",
			units, st.Commits, float64(int64(units)*pool.unitBytes)/float64(max(st.Commits, 1))/(1<<20), elapsed.Round(time.Millisecond),
			(st.Persist.Sum / time.Duration(max(st.Persist.Count, 1))).Round(time.Millisecond), cfg.QueueCapacity, cfg.PartConcurrency)
		tot.add(pool, units, counter, elapsed)
		h.Kill()
		closeStore()
		b.StartTimer()
	}
	tot.report(b, false)
}

// e2ePool is the units' batches: all the same shape, so every unit has
// the same bytes and rows and both sub-benchmarks move the same total.
type e2ePool struct {
	batches   []arrow.RecordBatch
	unitBytes int64 // Arrow buffer bytes of each batch
	unitRows  int64
}

func newE2EPool() *e2ePool {
	const idBytes = len("e2e-00-0000000")
	rows := e2eUnitBytes / (idBytes + 4 + 8 + e2ePayloadBytes + 4) // + offsets of the two variable columns
	rng := rand.New(rand.NewPCG(0xe2e, 0xe2e))
	raw := make([]byte, e2ePayloadBytes/2)
	p := &e2ePool{unitRows: int64(rows)}
	for k := range e2ePoolUnits {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, walSchema)
		ids := bld.Field(0).(*array.StringBuilder)
		ords := bld.Field(1).(*array.Int64Builder)
		pays := bld.Field(2).(*array.BinaryBuilder)
		for r := range rows {
			for i := range raw {
				raw[i] = byte(rng.Uint32())
			}
			ids.Append(fmt.Sprintf("e2e-%02d-%07d", k, r))
			ords.Append(int64(r))
			pays.Append([]byte(hex.EncodeToString(raw)))
		}
		batch := bld.NewRecordBatch()
		bld.Release()
		n := arrowBytes(batch)
		if k > 0 && n != p.unitBytes {
			panic(fmt.Sprintf("e2e pool: batch %d has %d bytes, batch 0 has %d", k, n, p.unitBytes))
		}
		p.unitBytes = n
		p.batches = append(p.batches, batch)
	}
	return p
}

// unit i goes to namespace i%6.
func (p *e2ePool) unit(i int) engine.Unit {
	return engine.Unit{
		Key:     walKey(walNamespaces[i%len(walNamespaces)]),
		Schema:  walSchema,
		Batches: []arrow.RecordBatch{p.batches[i%len(p.batches)]},
	}
}

// e2eStore is a fresh gofakes3 and a counted client to it. close stops
// the server and drops the backend's objects.
func e2eStore(b *testing.B) (client *s3.Client, counter *requestCounter, close func()) {
	backend := s3mem.New()
	if err := backend.CreateBucket(testBucket); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	counter = &requestCounter{base: tr}
	var once sync.Once
	close = func() {
		once.Do(func() {
			srv.Close()
			tr.CloseIdleConnections()
		})
	}
	b.Cleanup(close)
	return newClientVia(srv.URL, counter), counter, close
}

// e2eTotals accumulates over b.N iterations.
type e2eTotals struct {
	bytes, rows, writes, all, lakeBytes, files int64
	elapsed                                    time.Duration
}

// add counts one iteration: units of pool moved in elapsed, and the
// requests counter saw.
func (t *e2eTotals) add(pool *e2ePool, units int, counter *requestCounter, elapsed time.Duration) {
	t.bytes += int64(units) * pool.unitBytes
	t.rows += int64(units) * pool.unitRows
	t.writes += counter.writes()
	t.all += counter.all()
	t.elapsed += elapsed
}

func (t e2eTotals) report(b *testing.B, lake bool) {
	gib := float64(t.bytes) / (1 << 30)
	b.ReportMetric(float64(t.rows)/t.elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(t.writes)/gib, "write-reqs/GiB")
	b.ReportMetric(float64(t.all)/gib, "all-reqs/GiB")
	if lake {
		b.ReportMetric(float64(t.lakeBytes)/float64(t.bytes), "lake-bytes/B")
	}
}

// e2eSpanning are the lake's lane limits in pipeline-spanning: jobs that
// span segments, cut at 32 MiB of a namespace's rows (about one job per
// namespace of the run) or after a second.
var e2eSpanning = engine.LaneLimits{FileBytes: 32 << 20, FlushInterval: time.Second}

func benchE2EPipeline(b *testing.B, pool *e2ePool, units int, lanes engine.LaneLimits) {
	b.SetBytes(int64(units) * pool.unitBytes)
	var tot e2eTotals
	for range b.N {
		b.StopTimer()
		client, counter, closeStore := e2eStore(b)
		cfg := e2eConfig()
		cfg.DefaultLanes = lanes
		h := newWALHostWith(b, cfg, client, e2eRequestTimeout, func(l *Loop, s *S3Store) engine.Sinks {
			return sinks.Set{"lake": sinks.NewParquetObjects(s, l.Executor(), e2eLakePrefix)}
		})
		ctx := context.Background()
		if err := h.Start(ctx); err != nil {
			b.Fatal(err)
		}
		counter.reset() // recovery's requests are start-up cost, not per GiB
		b.StartTimer()
		start := time.Now()
		e2eIngest(b, ctx, h, pool, units)
		st := e2eAwaitDrained(b, ctx, h, int64(units)*pool.unitRows)
		elapsed := time.Since(start)
		b.StopTimer()
		writes, all := counter.writes(), counter.all()
		byKind := fmt.Sprintf("%d PUT, %d UploadPart, %d Create, %d Complete, %d DELETE, %d GET/HEAD/LIST",
			counter.puts.Load(), counter.parts.Load(), counter.creates.Load(), counter.completes.Load(),
			counter.deletes.Load(), counter.reads.Load())
		if err := h.Close(ctx); err != nil {
			b.Fatal(err)
		}
		if st.PersistFailures > 0 || st.InDoubt > 0 || st.SinkFailures > 0 {
			b.Fatalf("persist failures %d, in-doubt commits %d, sink failures %d: the counts include retries",
				st.PersistFailures, st.InDoubt, st.SinkFailures)
		}
		lakeRows, lakeBytes, files := e2eReadLake(b, ctx, client)
		if want := int64(units) * pool.unitRows; lakeRows != want || files != int(st.JobsApplied) {
			b.Fatalf("the lake holds %d rows in %d files; %d rows were acked, %d jobs applied", lakeRows, files, want, st.JobsApplied)
		}
		b.Logf("%d units, %d segments (%.1f MiB each on average), %d Parquet files (%.1f MiB); requests: %s",
			units, st.Commits, float64(int64(units)*pool.unitBytes)/float64(max(st.Commits, 1))/(1<<20),
			files, float64(lakeBytes)/(1<<20), byKind)
		closeStore()
		tot.bytes += int64(units) * pool.unitBytes
		tot.rows += int64(units) * pool.unitRows
		tot.writes += writes
		tot.all += all
		tot.lakeBytes += lakeBytes
		tot.files += int64(files)
		tot.elapsed += elapsed
		b.StartTimer()
	}
	tot.report(b, true)
	b.ReportMetric(float64(tot.files)/float64(b.N), "files/op")
}

// e2eIngest submits units 0…units-1 from e2eWriters goroutines, each with
// its own offset key, and returns once every one is acked.
func e2eIngest(b *testing.B, ctx context.Context, h *Host, pool *e2ePool, units int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range e2eWriters {
		wg.Go(func() {
			key := fmt.Sprintf("bench/%02d", w)
			for seq := uint64(1); ; seq++ {
				i := int(next.Add(1) - 1)
				if i >= units {
					return
				}
				u := pool.unit(i)
				u.Offsets = segment.Offsets{{Key: key, Value: seq}}
				if _, err := ingestUntilTaken(ctx, h, u, time.Millisecond); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// e2eAwaitDrained polls the host until every acked row is applied and
// every segment reclaimed.
func e2eAwaitDrained(b *testing.B, ctx context.Context, h *Host, rows int64) engine.Stats {
	deadline := time.Now().Add(e2eDrainWait)
	for {
		st, err := h.Stats(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if st.RowsApplied >= uint64(rows) && st.LiveSegments == 0 {
			return st
		}
		if time.Now().After(deadline) {
			b.Fatalf("not drained after %v: %+v", e2eDrainWait, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// e2eReadLake lists the lake and reads every object's Parquet footer: the
// rows, bytes and files it holds.
func e2eReadLake(b *testing.B, ctx context.Context, client *s3.Client) (rows, size int64, files int) {
	for _, key := range listKeys(b, ctx, client, e2eLakePrefix+"/") {
		if !strings.HasSuffix(key, ".parquet") {
			b.Fatalf("lake object %s is not a Parquet file", key)
		}
		body := readObject(b, ctx, client, key)
		pf, err := file.NewParquetReader(bytes.NewReader(body))
		if err != nil {
			b.Fatalf("%s: %v", key, err)
		}
		rows += pf.NumRows()
		pf.Close()
		size += int64(len(body))
		files++
	}
	return rows, size, files
}

func benchE2ERawUpload(b *testing.B, pool *e2ePool, units int) {
	total := int64(units) * pool.unitBytes
	b.SetBytes(total)
	part := rawPart()
	var tot e2eTotals
	for range b.N {
		b.StopTimer()
		client, counter, closeStore := e2eStore(b)
		b.StartTimer()
		start := time.Now()
		e2eRawUpload(b, client, part, total)
		elapsed := time.Since(start)
		b.StopTimer()
		tot.add(pool, units, counter, elapsed)
		closeStore()
		b.StartTimer()
	}
	tot.report(b, false)
}

// rawPart is a part's worth of random bytes, the raw uploads' content.
func rawPart() []byte {
	part := make([]byte, engine.DefaultPartBytes)
	rng := rand.New(rand.NewPCG(0xe2e, 0x9a77))
	for i := range part {
		part[i] = byte(rng.Uint32())
	}
	return part
}

// e2eRawUpload writes total bytes as e2eTargetBytes objects of part-sized
// parts, e2eRawParts uploads (one part each) in flight.
func e2eRawUpload(b *testing.B, client *s3.Client, part []byte, total int64) {
	e2eEach(int((total+e2eTargetBytes-1)/e2eTargetBytes), func(o int) {
		size := min(e2eTargetBytes, total-int64(o)*e2eTargetBytes)
		if err := e2eUploadObject(client, fmt.Sprintf("raw/%06d", o), part, size); err != nil {
			b.Error(err)
		}
	})
}

// e2eUploadObject uploads one object of size bytes (prefixes of part) as
// a multipart upload, one request at a time, each one HTTP attempt like
// S3Store's.
func e2eUploadObject(client *s3.Client, key string, part []byte, size int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), e2eDrainWait)
	defer cancel()
	bucket := aws.String(testBucket)
	up, err := client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: bucket, Key: aws.String(key)}, noRetries)
	if err != nil {
		return err
	}
	var done []types.CompletedPart
	for n := int32(1); size > 0; n++ {
		body := part[:min(size, int64(len(part)))]
		out, err := client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: bucket, Key: aws.String(key), UploadId: up.UploadId, PartNumber: aws.Int32(n),
			Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
		}, noRetries)
		if err != nil {
			return err
		}
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag})
		size -= int64(len(body))
	}
	_, err = client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: bucket, Key: aws.String(key), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done},
	}, noRetries)
	return err
}
