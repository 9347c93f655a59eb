package storage

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sinks"
)

// TestWALParquetIntegration is the whole pipeline on the production
// runtime — Host, Loop, S3Store over aws-sdk-go-v2 against an in-process
// gofakes3, and sinks.ParquetObjects (sink_ref "lake") writing into the
// same bucket — from ingest to Parquet, with crashes in the compaction
// half of the pipeline:
//
//   - 16 streams ingest units into six namespaces (walRun.stream): 12
//     replayable ones keyed by offset (one unit in flight per offset key),
//     4 idempotent ones keyed by idempotency key. Every row carries a
//     record id, (uid, row), unique over the run.
//   - The engine is killed five times mid-flight (Host.Kill, no shutdown):
//     while a Parquet PUT of the sink is held at the HTTP transport, while
//     a commit-marker PUT is held, while a completion-bitmap PUT is held,
//     while the marker DELETE that starts a reclaim is held, and at a
//     random moment — each time while the engine also holds units it has
//     not answered. Held requests reach the store after the kill (the
//     gate's land mode), as a request already on the wire would, before
//     the next recovery's fence wait ends. Each restart is a fresh Host on
//     a fresh, empty t.TempDir() that recovers from the bucket; replayable
//     streams resume from Host.Offsets, idempotent ones resubmit their
//     unanswered units with the same keys.
//   - A sixth incarnation ingests and is closed gracefully while the
//     streams are still submitting (units it refuses are never committed:
//     they must not reach the lake), with one namespace's sink PUTs
//     stalled so that it leaves a backlog. A seventh recovers, ingests
//     nothing, and waits until compaction has drained (Stats:
//     LiveSegments == 0) and its sweeper (SweepInterval 200 ms,
//     OrphanGrace 0) has removed what the crashes left: no .seg,
//     .seg.commit, .seg.scbl or multipart upload may remain under the WAL
//     prefix. (Close alone does not drain: it starts no new jobs.)
//
// Then every Parquet object under the sink prefix is read back with
// arrow-go's pqarrow reader, and the lake must hold exactly the committed
// units (docs/DESIGN.md §2.3): every acked record exactly once; a unit whose
// ingest was left unanswered at most once — exactly once if the final
// offsets view says it committed (its offset is covered, or its
// idempotency key is recorded), which includes every unit resubmitted and
// acked; nothing else. A unit is never split or torn: its rows sit in one
// file, contiguous and in row order. Within each offset key, units appear
// in offset order when files are ordered by the segment their job came
// from. The object key names only the job ID, so loggingSink (a thin
// wrapper around the real sink) records each job's segment when the
// engine asks for it; the per-namespace order in which applies first
// succeeded is checked against segment order too.
var parquetSeed = flag.Uint64("parquet.seed", 0, "seed of TestWALParquetIntegration's unit sizes and phase lengths (0: from the clock)")

const (
	pqRequestTimeout = 500 * time.Millisecond // FenceWait 625 ms (walConfig)
	pqLakePrefix     = "lake"                 // the sink's key prefix; walKey's sink_ref is "lake" too
	pqWALPrefix      = "wal"
	pqHeldWait       = 10 * time.Second // a phase's wait for the request it kills at
	// pqKillDelay: the kill comes at least this long after the request it
	// waits for is held (well inside the request timeout, so it is still
	// held), and once the engine holds a unit it has not answered
	// (awaitTaken, up to pqTakenWait). A sink PUT can follow the commit
	// whose acks released every stream before the streams submit again;
	// waiting lets them, so that each kill also finds ingest mid-flight.
	pqKillDelay = 20 * time.Millisecond
	pqTakenWait = 2 * time.Second
	pqLandWait  = 5 * time.Second // the wait for held requests to reach the store
	pqDrainWait = 20 * time.Second
	pqErrorsMax = 40 // verifyLake stops reporting after this many findings
)

// pqKillPoint is one crash window. Once the phase arms it, the gate holds
// every request hold matches, and the host is killed as soon as a held
// request's path satisfies trigger. A nil hold kills at a random moment.
// stall, if set, is held from the start of the phase.
type pqKillPoint struct {
	name    string
	hold    func(*http.Request) bool
	trigger func(path string) bool
	stall   func(*http.Request) bool
}

var pqKillPoints = []pqKillPoint{
	{"while a sink PUT is held", isSinkPut, isParquetPath, nil},
	// The marker lands after the kill: its units are committed but their
	// ingest calls unanswered, so replayable streams skip them (their
	// offsets are covered) and idempotent resubmissions are acked from
	// the offsets view without being stored again.
	{"while a marker PUT is held", isMarkerPut, isMarkerPath, nil},
	// Holding one namespace's sink PUTs for the whole phase stalls that
	// lane, so every segment committed meanwhile stays incomplete and gets
	// its bitmap written once its other jobs are applied: the next
	// recovery resumes a backlog from bitmaps. The kill waits for a bitmap
	// PUT held once armed.
	{"while a bitmap PUT is held", isBitmapPut, isBitmapPath, func(r *http.Request) bool { return isSinkPutIn(r, "metrics") }},
	// A reclaim deletes the marker first (the segment stops being owned).
	{"while a reclaim DELETE is held", isMarkerDelete, isMarkerPath, nil},
	{"at a random moment", nil, nil, nil},
}

func isParquetPath(p string) bool { return strings.HasSuffix(p, ".parquet") }
func isBitmapPath(p string) bool  { return strings.HasSuffix(p, ".seg.scbl") }
func isMarkerPath(p string) bool  { return strings.HasSuffix(p, ".seg.commit") }

func isSinkPut(req *http.Request) bool {
	return req.Method == http.MethodPut && isParquetPath(req.URL.Path)
}

func isSinkPutIn(req *http.Request, ns string) bool {
	return isSinkPut(req) && strings.Contains(req.URL.Path, "/"+pqLakePrefix+"/"+ns+"/")
}

func isBitmapPut(req *http.Request) bool {
	return req.Method == http.MethodPut && isBitmapPath(req.URL.Path)
}

func isMarkerDelete(req *http.Request) bool {
	return req.Method == http.MethodDelete && isMarkerPath(req.URL.Path)
}

// applyLog records, over every incarnation, each compaction job a sink
// was asked to apply — its segment, namespace and object key — and the
// order in which applies first succeeded. Sinks call it on their hosts'
// loops; the test reads it once every host has stopped.
type applyLog struct {
	t         *testing.T
	mu        sync.Mutex
	jobs      map[string]*loggedJob // by job ID
	successes int
}

type loggedJob struct {
	id, ns, key string
	seg         engine.SnapshotID
	calls       int
	firstOK     int // 1-based order of the job's first successful Apply; 0: none yet
}

func (l *applyLog) called(job *engine.Job, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.jobs[job.ID]
	if j == nil {
		j = &loggedJob{id: job.ID, ns: job.Namespace, key: key, seg: job.Segment}
		l.jobs[job.ID] = j
	}
	if j.ns != job.Namespace || j.seg != job.Segment || j.key != key {
		// A compaction_id must be a pure function of the segment and
		// its PARTs (docs/DESIGN.md §8.1): one ID, one segment, one object.
		l.t.Errorf("job %s applied as segment %s namespace %s key %s, earlier as %s %s %s",
			job.ID, job.Segment, job.Namespace, key, j.seg, j.ns, j.key)
	}
	j.calls++
}

func (l *applyLog) succeeded(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if j := l.jobs[id]; j.firstOK == 0 {
		l.successes++
		j.firstOK = l.successes
	}
}

// loggingSink is the real sink with the test's log around it.
type loggingSink struct {
	inner  engine.Sink
	prefix string
	log    *applyLog
}

func (s *loggingSink) Apply(job *engine.Job, done func(error)) {
	id := job.ID
	s.log.called(job, sinks.ObjectKey(s.prefix, job))
	s.inner.Apply(job, func(err error) {
		if err == nil {
			s.log.succeeded(id)
		}
		done(err)
	})
}

// pqWorld is one run of the test.
type pqWorld struct {
	t        *testing.T
	ctx      context.Context
	endpoint string
	reader   *s3.Client // the test's own client: never gated
	cfg      engine.Config
	layout   engine.Layout
	run      *walRun
	streams  []*walStream
	rng      *rand.Rand
	log      *applyLog

	landed         int // held requests that reached the store after a kill
	swept, aborted int // orphans swept and stale uploads aborted, every incarnation
}

func TestWALParquetIntegration(t *testing.T) {
	t.Parallel()
	seed := *parquetSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (go test ./storage -race -run '^TestWALParquetIntegration$' -parquet.seed=%d replays the sizes and phase lengths drawn; goroutine timing is not replayed)", seed, seed)
	start := time.Now()
	srv := newFakeS3(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := walConfig("wal-parquet", pqRequestTimeout)
	cfg.Prefix = pqWALPrefix
	cfg.SweepInterval = 200 * time.Millisecond
	w := &pqWorld{
		t: t, ctx: ctx, endpoint: srv.URL, reader: newTestClient(srv.URL),
		cfg: cfg, layout: engine.NewLayout(cfg.Prefix, cfg.Pipeline),
		run: &walRun{t: t, seed: seed, specs: map[string]walSpec{}, acked: map[string]bool{}},
		rng: rand.New(rand.NewPCG(seed, seed^0x9a59)),
		log: &applyLog{t: t, jobs: map[string]*loggedJob{}},
	}
	for g := range walStreams {
		w.streams = append(w.streams, &walStream{g: g, idem: g >= walStreams-walIdemStreams, next: 1})
	}
	for phase, kp := range pqKillPoints {
		w.killPhase(phase, kp)
		if t.Failed() {
			t.FailNow()
		}
	}
	w.closePhase(len(pqKillPoints))
	final := w.drain(len(pqKillPoints) + 1)
	if t.Failed() {
		t.FailNow()
	}
	w.verifyLake(final)
	r := w.run
	t.Logf("%d units submitted, %d acked, %d ingest calls unanswered at kills, %d refused; %d held requests landed after their host died; %d orphans swept, %d stale uploads aborted; %.1fs",
		len(r.specs), len(r.acked), r.unanswered, r.refused, w.landed, w.swept, w.aborted, time.Since(start).Seconds())
}

func (w *pqWorld) sinksOf(l *Loop, store *S3Store) engine.Sinks {
	inner := sinks.NewParquetObjects(store, l.Executor(), pqLakePrefix)
	return sinks.Set{"lake": &loggingSink{inner: inner, prefix: pqLakePrefix, log: w.log}}
}

// open starts a fresh host (fresh loop, store and empty local directory)
// whose requests go through rt, waits for its recovery, and resumes the
// streams from the recovered offsets.
func (w *pqWorld) open(rt http.RoundTripper, phase int) *Host {
	h := newWALHostWith(w.t, w.cfg, newClientVia(w.endpoint, rt), pqRequestTimeout, w.sinksOf)
	if err := h.Start(w.ctx); err != nil {
		w.t.Fatalf("phase %d: start: %v", phase, err)
	}
	st, err := h.Stats(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Logf("phase %d: recovered %d live segments with %d requests", phase, st.LiveSegments, st.RecoveryOps)
	w.resume(h, phase)
	return h
}

// resume checks the recovered offsets view against the record and moves
// every replayable stream to it: a stream goes on at its recovered offset
// + 1, so the unit it had in flight at the kill is submitted again unless
// its commit survived. Idempotent streams keep their retry lists.
func (w *pqWorld) resume(h *Host, phase int) segment.Offsets {
	t, r := w.t, w.run
	off, err := h.Offsets(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range w.streams {
		if s.idem {
			continue
		}
		v, _ := off.Get(s.offsetKey())
		if v < r.ackedHigh[s.g] {
			t.Errorf("phase %d: stream %d recovered offset %d below its acked %d", phase, s.g, v, r.ackedHigh[s.g])
		}
		if v > s.next {
			t.Errorf("phase %d: stream %d recovered offset %d, but only seqs up to %d were ever submitted", phase, s.g, v, s.next)
		}
		s.next = v + 1
	}
	// Acked idempotency keys outlive their segments in the key store.
	for uid := range r.acked {
		if g, _ := uidStream(uid); g >= walStreams-walIdemStreams {
			if known, err := h.IdempotencyKeyKnown(w.ctx, idemKeyOf(uid)); err != nil || !known {
				t.Errorf("phase %d: acked idempotent unit %s: key not in the recovered key store (%v)", phase, uid, err)
			}
		}
	}
	return off
}

// uidStream parses uidf's form.
func uidStream(uid string) (g int, seq uint64) {
	if _, err := fmt.Sscanf(uid, "g%d-%d", &g, &seq); err != nil {
		return -1, 0
	}
	return g, seq
}

// ingest runs every stream on h until stop is set or h stops.
func (w *pqWorld) ingest(h *Host) (stop *atomic.Bool, wait func()) {
	stop = new(atomic.Bool)
	var wg sync.WaitGroup
	for _, s := range w.streams {
		wg.Go(func() { w.run.stream(w.ctx, h, s, stop) })
	}
	return stop, wg.Wait
}

func (w *pqWorld) pause() time.Duration {
	return time.Duration(400+w.rng.IntN(500)) * time.Millisecond
}

func (w *pqWorld) unanswered() int {
	w.run.mu.Lock()
	defer w.run.mu.Unlock()
	return w.run.unanswered
}

// killPhase ingests on a fresh host for a while, then kills it at kp.
func (w *pqWorld) killPhase(phase int, kp pqKillPoint) {
	t := w.t
	var armed atomic.Bool
	var g *gate
	var rt http.RoundTripper = http.DefaultTransport
	if kp.hold != nil {
		g = newGate(func(req *http.Request) bool {
			return armed.Load() && kp.hold(req) || kp.stall != nil && kp.stall(req)
		}, true)
		rt = g
	}
	h := w.open(rt, phase)
	before := w.unanswered()
	_, wait := w.ingest(h)
	time.Sleep(w.pause())
	held := 0
	if g != nil {
		armed.Store(true)
		var caught bool
		if held, caught = awaitHeld(g, kp.trigger); !caught {
			t.Errorf("phase %d: no request to kill %s at arrived within %v", phase, kp.name, pqHeldWait)
		}
		time.Sleep(pqKillDelay)
	}
	if !w.awaitTaken(h) {
		t.Errorf("phase %d: the engine took no unit within %v", phase, pqTakenWait)
	}
	h.Kill()
	wait()
	st, err := h.Stats(w.ctx) // as the crash left them
	if err != nil {
		t.Fatal(err)
	}
	w.swept, w.aborted = w.swept+int(st.OrphansSwept), w.aborted+int(st.UploadsAborted)
	if g != nil {
		held += drainArrived(g)
		g.open()
		w.awaitLanded(g, held, phase)
	}
	n := w.unanswered() - before
	t.Logf("phase %d: killed %s (%d requests held); %d commits, %d jobs applied, %d sink failures, %d segments reclaimed, %d orphans swept; %d ingest calls left unanswered",
		phase, kp.name, held, st.Commits, st.JobsApplied, st.SinkFailures, st.SegmentsReclaimed, st.OrphansSwept, n)
	if n == 0 {
		t.Errorf("phase %d: the kill left no Ingest unanswered; it was not mid-flight", phase)
	}
}

// awaitTaken waits until h's engine holds a unit (it is not idle, read
// on the loop), or pqTakenWait has passed.
func (w *pqWorld) awaitTaken(h *Host) bool {
	for deadline := time.Now().Add(pqTakenWait); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		holds, err := query(w.ctx, h, func() bool { return !h.eng.Idle() })
		if err != nil {
			w.t.Fatal(err)
		}
		if holds {
			return true
		}
	}
	return false
}

// awaitHeld reads held requests' paths until one satisfies trigger. It
// returns how many it read.
func awaitHeld(g *gate, trigger func(string) bool) (n int, caught bool) {
	timeout := time.After(pqHeldWait)
	for {
		select {
		case p := <-g.arrived:
			n++
			if trigger(p) {
				return n, true
			}
		case <-timeout:
			return n, false
		}
	}
}

func drainArrived(g *gate) (n int) {
	for {
		select {
		case <-g.arrived:
			n++
		default:
			return n
		}
	}
}

// awaitLanded waits until n held requests have reached the store, so that
// they land inside the next recovery's fence wait as its contract
// requires (a request outlives its sender by at most the request timeout).
func (w *pqWorld) awaitLanded(g *gate, n, phase int) {
	timeout := time.After(pqLandWait)
	for range n {
		select {
		case <-g.landed:
			w.landed++
		case <-timeout:
			w.t.Errorf("phase %d: held requests still not sent %v after the gate opened", phase, pqLandWait)
			return
		}
	}
}

// closePhase ingests on a fresh host for a while and closes it
// gracefully under load: every unit it took is answered (acked), and
// each stream goes on until the engine refuses its next unit (ErrClosed)
// or the host has stopped before taking it (ErrStopped without
// ErrUnanswered). Those last units are never committed, and never
// submitted again. The sink's PUTs for one namespace never get through
// (they time out and die), so the segments of this phase are left for
// the drain to apply — a backlog resumed from their bitmaps.
func (w *pqWorld) closePhase(phase int) {
	t := w.t
	g := newGate(func(req *http.Request) bool { return isSinkPutIn(req, "orders") }, false)
	defer g.open()
	h := w.open(g, phase)
	before := w.unanswered()
	_, wait := w.ingest(h)
	time.Sleep(w.pause())
	if err := h.Close(w.ctx); err != nil {
		t.Fatalf("phase %d: close: %v", phase, err)
	}
	wait()
	if n := w.unanswered() - before; n != 0 {
		t.Fatalf("phase %d: %d units unanswered by a graceful close", phase, n)
	}
	st, err := h.Stats(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.swept, w.aborted = w.swept+int(st.OrphansSwept), w.aborted+int(st.UploadsAborted)
	t.Logf("phase %d: closed gracefully; %d commits, %d jobs applied, %d segments reclaimed, %d left to apply",
		phase, st.Commits, st.JobsApplied, st.SegmentsReclaimed, st.LiveSegments)
}

// drain recovers once more without ingesting, waits until every segment
// is applied and reclaimed and every orphan swept, closes, and returns
// the final offsets view.
func (w *pqWorld) drain(phase int) segment.Offsets {
	t := w.t
	h := w.open(http.DefaultTransport, phase)
	recovered, err := h.Stats(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(pqDrainWait)
	var st engine.Stats
	for {
		if st, err = h.Stats(w.ctx); err != nil {
			t.Fatal(err)
		}
		if st.LiveSegments == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("phase %d: %d segments still live after %v: %+v", phase, st.LiveSegments, pqDrainWait, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.waitWALEmpty(phase)
	off, err := h.Offsets(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The final view: the source offsets, and "idem/"+key for every
	// idempotency key the key store knows.
	w.run.mu.Lock()
	uids := slices.Collect(maps.Keys(w.run.specs))
	w.run.mu.Unlock()
	for _, uid := range uids {
		if g, _ := uidStream(uid); g >= walStreams-walIdemStreams {
			known, err := h.IdempotencyKeyKnown(w.ctx, idemKeyOf(uid))
			if err != nil {
				t.Fatal(err)
			}
			if known {
				off = off.Advance("idem/"+idemKeyOf(uid), 1)
			}
		}
	}
	if st, err = h.Stats(w.ctx); err != nil {
		t.Fatal(err)
	}
	w.swept, w.aborted = w.swept+int(st.OrphansSwept), w.aborted+int(st.UploadsAborted)
	if err := h.Close(w.ctx); err != nil {
		t.Fatalf("phase %d: close: %v", phase, err)
	}
	if st.Alerts != 0 {
		t.Errorf("phase %d: %d alerts while draining", phase, st.Alerts)
	}
	t.Logf("phase %d: recovered %d live segments (%d requests), drained: %d jobs applied, %d segments reclaimed, %d orphans swept, %d uploads aborted",
		phase, recovered.LiveSegments, recovered.RecoveryOps, st.JobsApplied, st.SegmentsReclaimed, st.OrphansSwept, st.UploadsAborted)
	return off
}

// waitWALEmpty waits until no segment object (.seg, .seg.commit,
// .seg.scbl) and no multipart upload is left under the WAL prefix.
func (w *pqWorld) waitWALEmpty(phase int) {
	var left []string
	for deadline := time.Now().Add(pqDrainWait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if left = w.walLeft(); len(left) == 0 {
			return
		}
	}
	if len(left) > 10 {
		left = append(left[:10], fmt.Sprintf("… %d more", len(left)-10))
	}
	w.t.Errorf("phase %d: the WAL is not empty after the drain: %q", phase, left)
}

func (w *pqWorld) walLeft() []string {
	var left []string
	for _, k := range listKeys(w.t, w.ctx, w.reader, w.layout.Root()) {
		if strings.HasSuffix(k, ".seg") || isMarkerPath(k) || isBitmapPath(k) {
			left = append(left, k)
		}
	}
	ups, err := w.reader.ListMultipartUploads(w.ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(testBucket), Prefix: aws.String(w.layout.Root())})
	switch {
	case err == nil:
		for _, u := range ups.Uploads {
			left = append(left, "upload of "+aws.ToString(u.Key))
		}
	case !strings.Contains(err.Error(), "NoSuchUpload"):
		w.t.Fatal(err) // gofakes3 answers NoSuchUpload for a bucket that never had one
	}
	return left
}

func listKeys(t testing.TB, ctx context.Context, reader *s3.Client, prefix string) []string {
	var keys []string
	p := s3.NewListObjectsV2Paginator(reader, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("list %s: %v", prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

func readObject(t testing.TB, ctx context.Context, reader *s3.Client, key string) []byte {
	out, err := reader.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return b
}

// lakeUnit is where a unit's rows were found in the lake.
type lakeUnit struct {
	job   *loggedJob // the job whose object holds the unit's first row
	rows  map[int64]int
	split bool // found in another object too (reported once)
}

// lakeCheck is verifyLake's state.
type lakeCheck struct {
	w        *pqWorld
	units    map[string]*lakeUnit
	files    int
	rows     int
	findings int
}

func (c *lakeCheck) errorf(format string, args ...any) {
	c.w.t.Helper()
	c.findings++
	switch {
	case c.findings < pqErrorsMax:
		c.w.t.Errorf(format, args...)
	case c.findings == pqErrorsMax:
		c.w.t.Errorf("… more findings left unreported")
	}
}

// verifyLake reads every object under the sink prefix and checks the lake
// against the record and the final offsets view (see the test's comment).
func (w *pqWorld) verifyLake(final segment.Offsets) {
	c := &lakeCheck{w: w, units: map[string]*lakeUnit{}}
	keys := listKeys(w.t, w.ctx, w.reader, pqLakePrefix+"/")
	inLake := map[string]bool{}
	for _, key := range keys {
		id := strings.TrimSuffix(path.Base(key), ".parquet")
		job := w.log.jobs[id]
		switch {
		case !isParquetPath(key):
			c.errorf("lake object %s is not a Parquet file", key)
			continue
		case job == nil:
			c.errorf("lake object %s: no sink was ever asked to apply job %s", key, id)
			// Read it anyway, so that what it duplicates is reported.
			ns, _, _ := strings.Cut(strings.TrimPrefix(key, pqLakePrefix+"/"), "/")
			job = &loggedJob{id: id, ns: ns, key: key}
		case job.key != key:
			c.errorf("lake object %s: job %s belongs at %s", key, id, job.key)
		case job.firstOK == 0:
			c.errorf("lake object %s: job %s never reported applied", key, id)
		}
		inLake[id] = true
		c.readFile(key, job, readObject(w.t, w.ctx, w.reader, key))
	}
	for id, j := range w.log.jobs {
		if j.firstOK != 0 && !inLake[id] {
			c.errorf("job %s (segment %s, %s) was reported applied but %s is not in the lake", id, j.seg, j.ns, j.key)
		}
	}
	c.checkUnits(final)
	c.checkOffsetOrder()
	c.checkApplyOrder(inLake)
	replays := 0
	for _, j := range w.log.jobs {
		if j.calls > 1 {
			replays++
		}
	}
	w.t.Logf("lake: %d Parquet objects, %d rows, %d units; %d jobs, %d of them applied more than once", c.files, c.rows, len(c.units), len(w.log.jobs), replays)
}

// readFile reads one object with pqarrow and records its rows. Within a
// file, a unit's rows must be contiguous and in row order, and a unit
// must not appear twice.
func (c *lakeCheck) readFile(key string, job *loggedJob, body []byte) {
	c.files++
	pf, err := file.NewParquetReader(bytes.NewReader(body))
	if err != nil {
		c.errorf("%s: parquet: %v", key, err)
		return
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		c.errorf("%s: pqarrow: %v", key, err)
		return
	}
	tbl, err := fr.ReadTable(c.w.ctx)
	if err != nil {
		c.errorf("%s: pqarrow read: %v", key, err)
		return
	}
	defer tbl.Release()
	if !sameColumns(tbl.Schema(), walSchema) {
		c.errorf("%s: schema %v, want %v", key, tbl.Schema(), walSchema)
		return
	}
	tr := array.NewTableReader(tbl, 0)
	defer tr.Release()
	prevUID, prevRow := "", int64(0)
	inFile := map[string]bool{}
	for tr.Next() {
		rec := tr.RecordBatch()
		uids, ords, pays := rec.Column(0).(*array.String), rec.Column(1).(*array.Int64), rec.Column(2).(*array.Binary)
		for i := range int(rec.NumRows()) {
			uid, row := uids.Value(i), ords.Value(i)
			c.rows++
			switch {
			case uid == prevUID && row != prevRow+1:
				c.errorf("%s: unit %s row %d follows row %d", key, uid, row, prevRow)
			case uid != prevUID && inFile[uid]:
				c.errorf("%s: unit %s appears twice in one file", key, uid)
			case uid != prevUID && row != 0:
				c.errorf("%s: unit %s starts at row %d", key, uid, row)
			}
			inFile[uid] = true
			prevUID, prevRow = uid, row
			c.record(key, job, uid, row, pays.Value(i))
		}
	}
	if err := tr.Err(); err != nil {
		c.errorf("%s: reading records: %v", key, err)
	}
}

// sameColumns compares names and types only: the reader adds field
// metadata (PARQUET:field_id).
func sameColumns(got, want *arrow.Schema) bool {
	if got.NumFields() != want.NumFields() {
		return false
	}
	for i, f := range want.Fields() {
		g := got.Field(i)
		if g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) {
			return false
		}
	}
	return true
}

func (c *lakeCheck) record(key string, job *loggedJob, uid string, row int64, payload []byte) {
	spec, ok := c.w.run.lookup(uid)
	switch {
	case !ok:
		c.errorf("%s holds record %s/%d of a unit nobody submitted", key, uid, row)
		return
	case row < 0 || row >= int64(spec.rows):
		c.errorf("%s holds record %s/%d; the unit has %d rows", key, uid, row, spec.rows)
		return
	case spec.ns != job.ns:
		c.errorf("%s holds unit %s of namespace %s in namespace %s", key, uid, spec.ns, job.ns)
	case !bytes.Equal(payload, walPayload(uid, int(row), spec.payloadBytes)):
		c.errorf("%s: record %s/%d has another payload", key, uid, row)
	}
	u := c.units[uid]
	if u == nil {
		u = &lakeUnit{job: job, rows: map[int64]int{}}
		c.units[uid] = u
	} else if u.job != job && !u.split {
		u.split = true
		c.errorf("unit %s is in %s and in %s", uid, u.job.key, key)
	}
	u.rows[row]++
}

// checkUnits: the lake holds exactly the committed units, each whole and
// once. A unit is committed iff the final view says so: a replayable
// unit's seq is at most its stream's offset (offsets are high-water marks
// and a stream has one unit in flight), an idempotent unit's key is
// recorded. Every acked unit must be committed.
func (c *lakeCheck) checkUnits(final segment.Offsets) {
	r := c.w.run
	var acked, committedUnacked, absent int
	for uid, spec := range r.specs {
		g, seq := uidStream(uid)
		var committed bool
		if g >= walStreams-walIdemStreams {
			_, committed = final.Get("idem/" + idemKeyOf(uid))
		} else {
			v, _ := final.Get(fmt.Sprintf("src/g%02d", g))
			committed = seq <= v
		}
		if r.acked[uid] && !committed {
			c.errorf("acked unit %s is not committed in the final offsets view", uid)
		}
		u := c.units[uid]
		switch {
		case u == nil && (committed || r.acked[uid]):
			c.errorf("unit %s (acked %v) is committed but not in the lake", uid, r.acked[uid])
		case u != nil && !committed:
			c.errorf("unit %s (acked %v) is in the lake but was never committed", uid, r.acked[uid])
		case u != nil && len(u.rows) != spec.rows:
			c.errorf("unit %s: %d of its %d rows are in the lake", uid, len(u.rows), spec.rows)
		}
		if u != nil {
			for row, n := range u.rows {
				if n != 1 {
					c.errorf("record %s/%d is in the lake %d times", uid, row, n)
				}
			}
		}
		switch {
		case r.acked[uid]:
			acked++
		case u != nil:
			committedUnacked++
		default:
			absent++
		}
	}
	c.w.t.Logf("units: %d acked, %d committed without an ack (answer lost at a kill), %d never committed", acked, committedUnacked, absent)
}

// checkOffsetOrder: within an offset key, units appear in offset order
// when files are ordered by their job's segment (commit order). A
// segment holds at most one unit of an offset key, since a stream waits
// for each answer before its next unit.
func (c *lakeCheck) checkOffsetOrder() {
	type at struct {
		seg engine.SnapshotID
		seq uint64
		uid string
	}
	byStream := map[int][]at{}
	for uid, u := range c.units {
		if g, seq := uidStream(uid); g >= 0 && g < walStreams-walIdemStreams {
			byStream[g] = append(byStream[g], at{u.job.seg, seq, uid})
		}
	}
	for g, units := range byStream {
		slices.SortFunc(units, func(a, b at) int {
			switch {
			case a.seg.Less(b.seg):
				return -1
			case b.seg.Less(a.seg):
				return 1
			}
			return 0
		})
		for i := 1; i < len(units); i++ {
			prev, cur := units[i-1], units[i]
			switch {
			case prev.seg == cur.seg:
				c.errorf("offset key src/g%02d: units %s and %s are both in segment %s", g, prev.uid, cur.uid, cur.seg)
			case cur.seq <= prev.seq:
				c.errorf("offset key src/g%02d: unit %s (segment %s) comes after %s (segment %s)", g, cur.uid, cur.seg, prev.uid, prev.seg)
			}
		}
	}
}

// checkApplyOrder: within a namespace (one compaction lane), jobs first
// succeeded in segment order, across every incarnation.
func (c *lakeCheck) checkApplyOrder(inLake map[string]bool) {
	byNS := map[string][]*loggedJob{}
	for id, j := range c.w.log.jobs {
		if inLake[id] && j.firstOK != 0 {
			byNS[j.ns] = append(byNS[j.ns], j)
		}
	}
	for ns, jobs := range byNS {
		slices.SortFunc(jobs, func(a, b *loggedJob) int {
			if a.seg.Less(b.seg) {
				return -1
			}
			if b.seg.Less(a.seg) {
				return 1
			}
			return 0
		})
		for i := 1; i < len(jobs); i++ {
			if jobs[i].firstOK < jobs[i-1].firstOK {
				c.errorf("namespace %s: job of segment %s was applied before the one of segment %s", ns, jobs[i].seg, jobs[i-1].seg)
			}
		}
	}
}
