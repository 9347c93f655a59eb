package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// BenchmarkRecoveryLanesWaiting measures recovery of an S3 WAL of 1,000
// live segments (issue 24, point 6), all held by lanes waiting to fill
// their files (jobs spanning segments, file_bytes far away, an hour's
// flush interval, no pressure valve): nothing was applied, so every
// segment is live and every namespace's open job spans all of them. The
// segments are made through the real host — one small unit (≈ 9 KiB,
// above a 4 KiB target) acked at a time is one segment — so the objects
// are real bodies, markers and an epoch claim. Against gofakes3 in
// process, through the real SDK client.
//
//   - recover: a new Host on the same bucket, timed from Start to ready
//     (FenceWait 0: the wait for a dead writer's requests is a constant,
//     not a cost of the log); it must own every segment and find the
//     open jobs again. It reports its requests by kind, per recovery,
//     counted at the client's HTTP transport (list-reqs, marker-gets,
//     body-gets, bitmap-gets, checkpoint-gets, other-gets, head-reqs,
//     put-reqs, delete-reqs), and fails if it GETs any body: a marker
//     carries what recovery needs. x-list-and-read-markers is its time
//     over that of a list-and-read-markers pass run beside each
//     recovery (the machine's load drifts between sub-benchmarks); its
//     log splits the time into steps (recoveryPhases).
//   - list-and-read-markers: the baseline, the floor of what recovery
//     must do: one LIST pass over the segments prefix and a GET of every
//     marker listed, RecoveryConcurrency in flight (the concurrency of
//     recovery's marker reads), one HTTP attempt each, through the same
//     client.
//   - list-read-markers-and-bitmaps: the baseline, then a GET of every
//     segment's bitmap (none exists), RecoveryConcurrency in flight: what
//     recovery would cost if it read bitmaps the LIST does not show.
//
// All report segments/s; the ratios (scripts/bench-ratios.awk) say what
// recovery costs beyond the reads it cannot avoid: the writer claim and
// seal, a GET of each bitmap the LIST shows (none here: nothing was
// applied; engine readBitmaps), the offsets checkpoint and
// the idempotency key store's manifests, decoding the markers, and the
// engine's loop and S3Store. Recovery stays bounded by live segments
// while lanes wait: cuts travel in markers.
func BenchmarkRecoveryLanesWaiting(b *testing.B) {
	const segs = 1000
	client, reqs := recoveryStore(b)
	ctx := context.Background()
	cfg := recoveryBenchConfig()
	h := newWALHostWith(b, cfg, client, e2eRequestTimeout, nil) // no sink: nothing is applied, nothing reclaimed
	if err := h.Start(ctx); err != nil {
		b.Fatal(err)
	}
	units := recoveryUnits()
	setup := time.Now()
	for i := range segs {
		u := units[i%len(units)]
		u.Offsets = segment.Offsets{{Key: "bench/rec", Value: uint64(i + 1)}}
		if _, err := ingestUntilTaken(ctx, h, u, time.Millisecond); err != nil {
			b.Fatal(err)
		}
	}
	st, err := h.Stats(ctx)
	if err != nil || st.LiveSegments != segs || len(st.OpenJobs) != len(walNamespaces) {
		b.Fatalf("before the crash: %d segments live (want %d), %d open jobs (want %d): %v",
			st.LiveSegments, segs, len(st.OpenJobs), len(walNamespaces), err)
	}
	live, open := st.LiveSegments, len(st.OpenJobs)
	h.Kill() // a crash: nothing applied, every lane waiting
	made := fmt.Sprintf("set-up: %d segments (%d units acked one at a time, %.1f KiB of body each) in %v",
		live, segs, float64(st.SegmentBytes)/float64(live)/(1<<10), time.Since(setup).Round(time.Millisecond))

	prefix := h.Layout().SegmentsPrefix()
	b.Run(fmt.Sprintf("segments=%d/recover", live), func(b *testing.B) {
		var total reqCounts
		var elapsed, paired time.Duration
		var phases recoveryPhases
		var dials, engineOps int64
		for i := range b.N {
			b.StopTimer()
			r := newWALHostWith(b, cfg, client, e2eRequestTimeout, nil)
			// The paired baseline pass, before the recovery in odd
			// iterations and after it in even ones: the machine's load
			// drifts, and the ratio of the two wants them side by side.
			if i%2 == 1 {
				paired += listAndReadPass(b, ctx, client, prefix, live, cfg.RecoveryConcurrency, false)
			}
			runtime.GC() // each timed part starts with the garbage of none before it
			reqs.reset()
			b.StartTimer()
			start := time.Now()
			if err := r.Start(ctx); err != nil {
				b.Fatal(err)
			}
			took := time.Since(start)
			b.StopTimer()
			// Once ready, the sweep lists the multipart uploads
			// (upload-lists): after recovery, not part of it.
			got := reqs.snapshot()
			dials += reqs.dials.Load()
			phases.add(reqs, took)
			st, err := r.Stats(ctx)
			r.Kill()
			if err != nil || st.LiveSegments != live || len(st.OpenJobs) != open {
				b.Fatalf("recovered %d segments (want %d), %d open jobs (want %d): %v", st.LiveSegments, live, len(st.OpenJobs), open, err)
			}
			if got[reqGetBody] != 0 || got[reqGetBitmap] != 0 {
				b.Fatalf("recovery of %d segments GET %d bodies and %d bitmaps (none exists); requests: %v", live, got[reqGetBody], got[reqGetBitmap], got)
			}
			total.add(got)
			elapsed += took
			engineOps += int64(st.RecoveryOps)
			if i%2 == 0 {
				paired += listAndReadPass(b, ctx, client, prefix, live, cfg.RecoveryConcurrency, false)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(live)*float64(b.N)/elapsed.Seconds(), "segments/s")
		b.ReportMetric(elapsed.Seconds()/paired.Seconds(), "x-list-and-read-markers")
		total.report(b)
		b.Logf("%s; %d recoveries: %v each (paired list-and-read-markers %v); phases: %s; requests per recovery %v; %.1f TCP dials; engine RecoveryOps %.1f",
			made, b.N, (elapsed / time.Duration(b.N)).Round(time.Microsecond), (paired / time.Duration(b.N)).Round(time.Microsecond),
			phases.per(b.N), total.per(b.N), float64(dials)/float64(b.N), float64(engineOps)/float64(b.N))
	})
	b.Run(fmt.Sprintf("segments=%d/list-and-read-markers", live), func(b *testing.B) {
		benchListAndRead(b, ctx, client, reqs, prefix, live, cfg.RecoveryConcurrency, false)
	})
	b.Run(fmt.Sprintf("segments=%d/list-read-markers-and-bitmaps", live), func(b *testing.B) {
		benchListAndRead(b, ctx, client, reqs, prefix, live, cfg.RecoveryConcurrency, true)
	})
}

// recoveryPhases sum where recoveries spent their time, told apart by
// the first request of each step: claim, LIST and seal until the first
// marker GET; the markers until the first bitmap GET; the bitmaps until
// the first checkpoint GET (none when no bitmap was listed); the
// checkpoint and the registration of the
// segments until ready.
type recoveryPhases struct{ claimList, markers, bitmaps, checkpoint time.Duration }

func (p *recoveryPhases) add(c *kindCounter, took time.Duration) {
	m, bm, ck := c.firstAt(reqGetMarker), c.firstAt(reqGetBitmap), c.firstAt(reqGetCheckpoint)
	if bm == 0 {
		bm = ck // no bitmap listed, none read
	}
	p.claimList += m
	p.markers += bm - m
	p.bitmaps += ck - bm
	p.checkpoint += took - ck
}

func (p recoveryPhases) per(n int) string {
	d := func(t time.Duration) time.Duration { return (t / time.Duration(n)).Round(10 * time.Microsecond) }
	return fmt.Sprintf("claim+LIST+seal %v, markers %v, bitmaps %v, checkpoint+register %v",
		d(p.claimList), d(p.markers), d(p.bitmaps), d(p.checkpoint))
}

// benchListAndRead runs listAndReadPass b.N times.
func benchListAndRead(b *testing.B, ctx context.Context, client *s3.Client, reqs *kindCounter, prefix string, live, limit int, bitmaps bool) {
	var total reqCounts
	var elapsed time.Duration
	var dials int64
	for range b.N {
		reqs.reset()
		elapsed += listAndReadPass(b, ctx, client, prefix, live, limit, bitmaps)
		total.add(reqs.snapshot())
		dials += reqs.dials.Load()
	}
	b.ReportMetric(float64(live)*float64(b.N)/elapsed.Seconds(), "segments/s")
	total.report(b)
	b.Logf("%d passes: requests per pass %v; %.1f TCP dials", b.N, total.per(b.N), float64(dials)/float64(b.N))
}

// listAndReadPass times one LIST pass over prefix and a GET of every
// marker listed, limit in flight — and, with bitmaps, then a GET of each
// of their segments' bitmaps (most missing) — each request one HTTP
// attempt, as S3Store sends them. It fails unless it listed live markers.
func listAndReadPass(b *testing.B, ctx context.Context, client *s3.Client, prefix string, live, limit int, bitmaps bool) time.Duration {
	runtime.GC()
	start := time.Now()
	keys := markerKeys(b, ctx, client, prefix)
	readAllConcurrently(b, ctx, client, keys, limit, false)
	if bitmaps {
		bms := make([]string, len(keys))
		for i, k := range keys {
			bms[i] = strings.TrimSuffix(k, ".commit") + ".scbl"
		}
		readAllConcurrently(b, ctx, client, bms, limit, true)
	}
	took := time.Since(start)
	if len(keys) != live {
		b.Fatalf("%d markers listed, %d segments live", len(keys), live)
	}
	return took
}

// recoveryBenchConfig: tiny segments (a 4 KiB target, below one unit, so
// every unit acked is a segment of its own), lanes that wait, a pressure
// valve that never opens (it would cut the waiting jobs at half the
// log), and no fence wait.
func recoveryBenchConfig() engine.Config {
	cfg := engine.DeriveConfig("wal", "bench-recovery", e2eTargetBytes, e2eWriters, 0)
	cfg.TargetBytes = 4 << 10
	cfg.FenceWait = 0
	cfg.DefaultLanes = engine.LaneLimits{FileBytes: 1 << 30, FlushInterval: time.Hour}
	cfg.ValveSegments = cfg.LiveSegmentsMax
	cfg.ValveBytes = 1 << 40
	return cfg
}

// recoveryUnits are 48 small units, 8 per namespace, reused round robin:
// 16 rows of 512 payload bytes each (≈ 9 KiB of Arrow).
func recoveryUnits() []engine.Unit {
	out := make([]engine.Unit, 48)
	for i := range out {
		out[i] = engine.Unit{
			Key:     walKey(walNamespaces[i%len(walNamespaces)]),
			Schema:  walSchema,
			Batches: []arrow.RecordBatch{walBatch(fmt.Sprintf("rec-%02d", i), 16, 512)},
		}
	}
	return out
}

// markerKeys lists the commit markers under prefix, page by page.
func markerKeys(b *testing.B, ctx context.Context, client *s3.Client, prefix string) []string {
	var out []string
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx, noRetries)
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range page.Contents {
			if strings.HasSuffix(*o.Key, ".seg.commit") {
				out = append(out, *o.Key)
			}
		}
	}
	return out
}

// readAllConcurrently GETs every key, reading each body to its end, with
// at most limit requests in flight; a missing key fails unless mayLack.
func readAllConcurrently(b *testing.B, ctx context.Context, client *s3.Client, keys []string, limit int, mayLack bool) {
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range min(limit, len(keys)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(keys) || failed.Load() != nil {
					return
				}
				out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(keys[i])}, noRetries)
				var missing *types.NoSuchKey
				switch {
				case err == nil:
					_, err = io.Copy(io.Discard, out.Body)
					out.Body.Close()
				case mayLack && errors.As(err, &missing):
					err = nil
				}
				if err != nil {
					err = fmt.Errorf("get %s: %w", keys[i], err)
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
}

// recoveryStore is a fresh gofakes3 and a client to it whose requests
// are counted by kind (and whose TCP dials are counted).
func recoveryStore(b *testing.B) (*s3.Client, *kindCounter) {
	url, tr := fakeS3(b)
	b.Cleanup(tr.CloseIdleConnections)
	c := &kindCounter{base: tr}
	c.reset()
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.dials.Add(1)
		return dial(ctx, network, addr)
	}
	return newClientVia(url, c), c
}

// reqKind is a kind of request as the benchmark reports it.
type reqKind int

const (
	reqList          reqKind = iota // LIST objects (GET ?list-type=2)
	reqListUploads                  // LIST multipart uploads (GET ?uploads)
	reqGetMarker                    // GET {id}.seg.commit
	reqGetBody                      // GET {id}.seg, whole or ranged
	reqGetBitmap                    // GET {id}.seg.scbl
	reqGetCheckpoint                // GET _offsets, _idem/…: the offsets checkpoint and the key store
	reqGetOther                     // GET of anything else: _writer, …
	reqHead
	reqPut // PUT, UploadPart included
	reqPost
	reqDelete
	reqKindCount
)

// reqKindNames are the metrics' units, per recovery.
var reqKindNames = [reqKindCount]string{
	reqList: "list-reqs", reqListUploads: "upload-lists", reqGetMarker: "marker-gets", reqGetBody: "body-gets",
	reqGetBitmap: "bitmap-gets", reqGetCheckpoint: "checkpoint-gets", reqGetOther: "other-gets", reqHead: "head-reqs", reqPut: "put-reqs",
	reqPost: "post-reqs", reqDelete: "delete-reqs",
}

func kindOf(req *http.Request) reqKind {
	q := req.URL.Query()
	switch req.Method {
	case http.MethodHead:
		return reqHead
	case http.MethodPut:
		return reqPut
	case http.MethodPost:
		return reqPost
	case http.MethodDelete:
		return reqDelete
	}
	path := req.URL.Path
	switch {
	case q.Has("uploads"):
		return reqListUploads
	case q.Has("list-type") || strings.TrimSuffix(path, "/") == "/"+testBucket:
		return reqList
	case strings.HasSuffix(path, ".seg.commit"):
		return reqGetMarker
	case strings.HasSuffix(path, ".seg.scbl"):
		return reqGetBitmap
	case strings.HasSuffix(path, ".seg"):
		return reqGetBody
	case strings.HasSuffix(path, "/_offsets") || strings.Contains(path, "/_idem/"):
		return reqGetCheckpoint
	}
	return reqGetOther
}

// kindCounter is an http.RoundTripper counting requests by kind, and
// noting when the first of each kind was sent.
type kindCounter struct {
	base  http.RoundTripper
	n     [reqKindCount]atomic.Int64
	first [reqKindCount]atomic.Int64 // ns after since, +1; 0: none yet
	since atomic.Pointer[time.Time]
	dials atomic.Int64
}

func (c *kindCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	k := kindOf(req)
	c.n[k].Add(1)
	if c.first[k].Load() == 0 {
		c.first[k].CompareAndSwap(0, int64(time.Since(*c.since.Load()))+1)
	}
	return c.base.RoundTrip(req)
}

// reset zeroes the counts and starts the clock of firstAt.
func (c *kindCounter) reset() {
	now := time.Now()
	c.since.Store(&now)
	for i := range c.n {
		c.n[i].Store(0)
		c.first[i].Store(0)
	}
	c.dials.Store(0)
}

// firstAt is when the first request of kind k was sent after reset (0 if
// none was).
func (c *kindCounter) firstAt(k reqKind) time.Duration {
	return time.Duration(max(c.first[k].Load()-1, 0))
}

func (c *kindCounter) snapshot() reqCounts {
	var s reqCounts
	for i := range c.n {
		s[i] = c.n[i].Load()
	}
	return s
}

// reqCounts are requests by kind.
type reqCounts [reqKindCount]int64

func (s *reqCounts) add(o reqCounts) {
	for i := range s {
		s[i] += o[i]
	}
}

// per returns the counts divided by n, as text.
func (s reqCounts) per(n int) string {
	var parts []string
	for k, v := range s {
		parts = append(parts, fmt.Sprintf("%s %.1f", reqKindNames[k], float64(v)/float64(n)))
	}
	return strings.Join(parts, ", ")
}

func (s reqCounts) String() string { return s.per(1) }

// report reports, per iteration, the counts of the kinds the issue
// names (LIST, GET by object kind, HEAD, PUT, DELETE), zeros included.
func (s reqCounts) report(b *testing.B) {
	for _, k := range []reqKind{reqList, reqGetMarker, reqGetBody, reqGetBitmap, reqGetCheckpoint, reqGetOther, reqHead, reqPut, reqDelete} {
		b.ReportMetric(float64(s[k])/float64(b.N), reqKindNames[k])
	}
}
