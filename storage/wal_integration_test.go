package storage

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// The real-world test: the engine on the production runtime
// (Host, Loop, S3Store over aws-sdk-go-v2) against an in-process gofakes3,
// with 16 goroutines ingesting into six namespaces, killed mid-flight
// three times — once as a multipart part is sent, once as a commit marker
// is sent, once at a random moment — and recovered each time by a fresh
// host on a fresh, empty local directory. After every recovery:
//
//   - every acked unit is in exactly one owned segment, with exactly its
//     rows and payloads (read back through the SDK, CheckBody against the
//     marker, ReadSlice of every PART);
//   - nothing owned was never submitted, and no unit is owned twice;
//   - the offsets view covers every acked replayable unit, and every unit
//     of a replayable stream up to its recovered offset is owned (no gap:
//     a stream submits seq n+1 only after n was acked or recovered);
//   - "idem/"+key is in the view for every acked idempotent unit, and a
//     key is in the view exactly when its unit is owned.
//
// Ingest then continues: replayable streams from the recovered offsets,
// idempotent streams resubmitting their unanswered units with the same
// keys first. The last incarnation closes gracefully instead: every Ingest
// it took is answered, none unanswered, and a final recovery checks the
// lot — and that the sweeper (OrphanGrace 0) left no orphan of an older
// epoch behind.

var walSeed = flag.Uint64("wal.seed", 0, "seed of TestWALIntegration's unit sizes and phase lengths (0: from the clock)")

const (
	walRequestTimeout = time.Second // FenceWait is 1.25 s (walConfig)
	walStreams        = 16
	walIdemStreams    = 4 // streams walStreams-walIdemStreams … walStreams-1 use idempotency keys
	walKills          = 3 // then a graceful close
)

// walStream is one ingesting goroutine's state. Between phases the test
// goroutine owns it; during a phase, its worker.
type walStream struct {
	g     int
	idem  bool
	next  uint64   // next seq to submit: replayable from the recovered offsets, idempotent ever-new
	retry []uint64 // idempotent: unanswered seqs, resubmitted first with their keys
}

func (s *walStream) offsetKey() string { return fmt.Sprintf("src/g%02d", s.g) }
func idemKeyOf(uid string) string      { return "key-" + uid }

// walRun is the test's record of what was submitted and acked.
type walRun struct {
	t    *testing.T
	seed uint64

	mu         sync.Mutex
	specs      map[string]walSpec
	acked      map[string]bool
	ackedHigh  [walStreams]uint64 // replayable streams: highest acked seq
	unanswered int                // ErrUnanswered results, all phases
	stopped    int                // ErrStopped results (taken or not by the engine), all phases
	refused    int                // definite refusals (backpressure, closing)
}

// spec is unit (g, seq)'s content: a pure function of the run's seed, so
// a resubmission is the same unit.
func (r *walRun) spec(g int, seq uint64) walSpec {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%d", r.seed, g, seq)
	x := h.Sum64()
	s := walSpec{
		uid:          uidf(g, seq),
		ns:           walNamespaces[x%uint64(len(walNamespaces))],
		rows:         8 + int(x>>8%57),
		payloadBytes: 64 + int(x>>16%193),
	}
	r.mu.Lock()
	r.specs[s.uid] = s
	r.mu.Unlock()
	return s
}

func (r *walRun) lookup(uid string) (walSpec, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.specs[uid]
	return s, ok
}

// tap signals when a request matching the armed predicate is sent; the
// request itself goes on untouched, so a Kill triggered by it races its
// completion, as a real crash would.
type tap struct {
	base  http.RoundTripper
	armed atomic.Pointer[tapTrigger]
}

type tapTrigger struct {
	match func(*http.Request) bool
	fired chan struct{}
	once  sync.Once
}

func (tp *tap) RoundTrip(req *http.Request) (*http.Response, error) {
	if tr := tp.armed.Load(); tr != nil && tr.match(req) {
		tr.once.Do(func() { close(tr.fired) })
	}
	return tp.base.RoundTrip(req)
}

func (tp *tap) arm(match func(*http.Request) bool) <-chan struct{} {
	tr := &tapTrigger{match: match, fired: make(chan struct{})}
	tp.armed.Store(tr)
	return tr.fired
}

func isPartUpload(req *http.Request) bool {
	return req.Method == http.MethodPut && req.URL.Query().Has("partNumber")
}

func TestWALIntegration(t *testing.T) {
	t.Parallel()
	runWALIntegration(t, "TestWALIntegration", 0)
}

// The same with lost answers: 10% of the writes (PUT, POST, DELETE) take
// effect in the store but their sender sees a transport error
// (ErrAmbiguous), so the engine's in-doubt paths run on the real runtime:
// settling a marker with a read after the fence wait, completing an
// upload twice, claiming an epoch whose answer was lost.
func TestWALIntegrationLostResponses(t *testing.T) {
	t.Parallel()
	runWALIntegration(t, "TestWALIntegrationLostResponses", 0.10)
}

// walWorld is one run of the integration test.
type walWorld struct {
	t       *testing.T
	ctx     context.Context
	reader  *s3.Client // the test's own client: never tapped, never lossy
	client  *s3.Client // the hosts' client
	tap     *tap
	cfg     engine.Config
	run     *walRun
	streams []*walStream
	rng     *rand.Rand

	swept, aborted uint64
}

func runWALIntegration(t *testing.T, name string, lossRate float64) {
	seed := *walSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (go test ./storage -race -run '^%s$' -wal.seed=%d replays the sizes, phase lengths and losses drawn; goroutine timing is not replayed)", seed, name, seed)
	start := time.Now()
	srv := newFakeS3(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w := &walWorld{
		t: t, ctx: ctx, reader: newTestClient(srv.URL),
		cfg: walConfig("wal-integration", walRequestTimeout),
		run: &walRun{t: t, seed: seed, specs: map[string]walSpec{}, acked: map[string]bool{}},
		rng: rand.New(rand.NewPCG(seed, seed^0x5eed)),
	}
	w.tap = &tap{base: http.DefaultTransport}
	loss := &lossy{base: http.DefaultTransport, rate: lossRate, rng: rand.New(rand.NewPCG(seed, seed^0x1055))}
	if lossRate > 0 {
		w.tap.base = loss
	}
	w.client = newClientVia(srv.URL, w.tap)
	for g := range walStreams {
		w.streams = append(w.streams, &walStream{g: g, idem: g >= walStreams-walIdemStreams, next: 1})
	}
	for phase := 0; phase <= walKills; phase++ {
		h := newWALHost(t, w.cfg, w.client, walRequestTimeout)
		if err := h.Start(ctx); err != nil {
			t.Fatalf("phase %d: start: %v", phase, err)
		}
		if phase > 0 {
			w.run.verify(ctx, w.reader, h, w.streams)
			if t.Failed() {
				t.FailNow()
			}
		}
		w.phase(h, phase)
	}
	h := newWALHost(t, w.cfg, w.client, walRequestTimeout)
	if err := h.Start(ctx); err != nil {
		t.Fatalf("final start: %v", err)
	}
	w.run.verify(ctx, w.reader, h, w.streams)
	waitSwept(t, ctx, w.reader, w.cfg)
	st, _ := h.Stats(ctx)
	w.swept, w.aborted = w.swept+st.OrphansSwept, w.aborted+st.UploadsAborted
	if err := h.Close(ctx); err != nil {
		t.Fatalf("final close: %v", err)
	}
	r := w.run
	t.Logf("%d units acked, %d unanswered at kills, %d refused; %d answers lost; %d orphan bodies swept, %d uploads aborted; %.1fs",
		len(r.acked), r.unanswered, r.refused, loss.lost.Load(), w.swept, w.aborted, time.Since(start).Seconds())
}

var walKillPoints = []struct {
	name  string
	match func(*http.Request) bool // nil: at once
}{{"at a part upload", isPartUpload}, {"at a marker PUT", isMarkerPut}, {"at a random moment", nil}}

// phase ingests on h from every stream for a random while, then kills h
// mid-flight — or, in the last phase, closes it gracefully.
func (w *walWorld) phase(h *Host, phase int) {
	t, r := w.t, w.run
	var stop atomic.Bool
	var wg sync.WaitGroup
	unansweredBefore, stoppedBefore := r.unanswered, r.stopped
	for _, s := range w.streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.stream(w.ctx, h, s, &stop)
		}()
	}
	time.Sleep(time.Duration(600+w.rng.IntN(600)) * time.Millisecond)
	st, err := h.Stats(w.ctx) // the sweep is long done
	if err != nil {
		t.Fatal(err)
	}
	w.swept, w.aborted = w.swept+st.OrphansSwept, w.aborted+st.UploadsAborted
	if phase == walKills {
		stop.Store(true)
		if err := h.Close(w.ctx); err != nil {
			t.Fatalf("close: %v", err)
		}
		wg.Wait()
		if n := r.unanswered - unansweredBefore; n != 0 {
			t.Fatalf("%d units unanswered by a graceful close", n)
		}
		t.Logf("phase %d: closed after %d commits (%d in doubt, %d persist failures)", phase, st.Commits, st.InDoubt, st.PersistFailures)
		return
	}
	how := walKillPoints[phase]
	if how.match != nil {
		select {
		case <-w.tap.arm(how.match):
		case <-time.After(5 * time.Second):
			t.Logf("phase %d: no request to kill %s within 5s; killing now", phase, how.name)
		}
	}
	h.Kill()
	wg.Wait()
	n, stopped := r.unanswered-unansweredBefore, r.stopped-stoppedBefore
	t.Logf("phase %d: killed %s; %d commits (%d in doubt, %d persist failures), %d ingest calls stopped, %d of them taken by the engine and left unanswered",
		phase, how.name, st.Commits, st.InDoubt, st.PersistFailures, stopped, n)
	// A call the loop had not yet taken (a busy loop on a loaded machine)
	// is stopped too: the kill still fell mid-flight.
	if stopped == 0 {
		t.Errorf("phase %d: the kill stopped no Ingest call; it was not mid-flight", phase)
	}
}

// lossy is an http.RoundTripper that loses the answer of a share of the
// writes: the request reaches the store, takes effect, and the sender
// gets a transport error instead of the response.
type lossy struct {
	base http.RoundTripper
	rate float64
	mu   sync.Mutex
	rng  *rand.Rand
	lost atomic.Int64
}

var errLostResponse = errors.New("test: response lost")

func (l *lossy) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		return l.base.RoundTrip(req)
	}
	l.mu.Lock()
	lose := l.rng.Float64() < l.rate
	l.mu.Unlock()
	resp, err := l.base.RoundTrip(req)
	if err != nil || !lose {
		return resp, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	l.lost.Add(1)
	return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, errLostResponse)
}

// stream is one ingesting goroutine for one phase: it submits until the
// host stops (Kill: its last unit is unanswered) or stop is set.
func (r *walRun) stream(ctx context.Context, h *Host, s *walStream, stop *atomic.Bool) {
	for !stop.Load() {
		retrying := s.idem && len(s.retry) > 0
		seq := s.next
		if retrying {
			seq = s.retry[0]
		}
		spec := r.spec(s.g, seq)
		u := spec.unit()
		if s.idem {
			u.IdempotencyKey = idemKeyOf(spec.uid)
		} else {
			u.Offsets = segment.Offsets{{Key: s.offsetKey(), Value: seq}}
		}
		err := h.Ingest(ctx, u)
		releaseUnit(u)
		switch {
		case err == nil:
			r.mu.Lock()
			r.acked[spec.uid] = true
			if !s.idem {
				r.ackedHigh[s.g] = max(r.ackedHigh[s.g], seq)
			}
			r.mu.Unlock()
			if retrying {
				s.retry = s.retry[1:]
			} else {
				s.next++
			}
		case errors.Is(err, ErrStopped):
			// Killed. An unanswered unit may or may not be committed:
			// replayable streams resume from the recovered offsets,
			// idempotent ones resubmit it with its key.
			r.mu.Lock()
			r.stopped++
			if errors.Is(err, ErrUnanswered) {
				r.unanswered++
			}
			r.mu.Unlock()
			if s.idem && !retrying {
				s.retry = append(s.retry, seq)
				s.next++
			}
			return
		case errors.Is(err, engine.ErrResourceExhausted), errors.Is(err, engine.ErrClosed):
			// Definite refusals: backpressure, or a graceful close began.
			r.mu.Lock()
			r.refused++
			r.mu.Unlock()
			if s.idem && !retrying {
				s.retry = append(s.retry, seq)
				s.next++
			}
			if errors.Is(err, engine.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		default:
			r.t.Errorf("stream %d unit %s: %v", s.g, spec.uid, err)
			return
		}
	}
}

// verify checks a freshly recovered host against the record and resets
// the replayable streams to the recovered offsets.
func (r *walRun) verify(ctx context.Context, reader *s3.Client, h *Host, streams []*walStream) {
	t := r.t
	t.Helper()
	owned := readOwned(t, ctx, reader, h, r.lookup)
	off, err := h.Offsets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid := range r.acked {
		if _, ok := owned[uid]; !ok {
			t.Errorf("acked unit %s is not in any owned segment", uid)
		}
	}
	for _, s := range streams {
		if s.idem {
			r.verifyIdem(ctx, h, s, owned)
			continue
		}
		v, _ := off.Get(s.offsetKey())
		if v < r.ackedHigh[s.g] {
			t.Errorf("stream %d: recovered offset %d below its acked %d", s.g, v, r.ackedHigh[s.g])
		}
		if v > s.next {
			t.Errorf("stream %d: recovered offset %d, but only seqs up to %d were ever submitted", s.g, v, s.next)
		}
		for seq := uint64(1); seq <= v; seq++ {
			if _, ok := owned[uidf(s.g, seq)]; !ok {
				t.Errorf("stream %d: offset %d recovered but unit %s is not owned", s.g, v, uidf(s.g, seq))
			}
		}
		for seq := v + 1; seq <= s.next; seq++ {
			if _, ok := owned[uidf(s.g, seq)]; ok {
				t.Errorf("stream %d: unit %s is owned above the recovered offset %d", s.g, uidf(s.g, seq), v)
			}
		}
		s.next = v + 1
	}
	for _, o := range off {
		if !strings.HasPrefix(o.Key, "src/g") && !strings.HasPrefix(o.Key, "idem/") {
			t.Errorf("unknown offset key %q", o.Key)
		}
	}
	t.Logf("recovered %d owned units in %d offsets entries", len(owned), len(off))
}

func (r *walRun) verifyIdem(ctx context.Context, h *Host, s *walStream, owned map[string]ownedUnit) {
	for seq := uint64(1); seq < s.next; seq++ {
		uid := uidf(s.g, seq)
		seen, err := h.IdempotencyKeyKnown(ctx, idemKeyOf(uid))
		if err != nil {
			r.t.Fatal(err)
		}
		_, isOwned := owned[uid]
		switch {
		case r.acked[uid] && !seen:
			r.t.Errorf("acked idempotent unit %s: key not in the key store", uid)
		case seen != isOwned:
			r.t.Errorf("idempotent unit %s: key in the key store %v, unit owned %v", uid, seen, isOwned)
		}
	}
}

// waitSwept waits until the bucket holds no orphan of an older epoch than
// the current writer's: no body without its marker, no multipart upload.
// The sweeper runs in the background after recovery, with OrphanGrace 0.
func waitSwept(t *testing.T, ctx context.Context, reader *s3.Client, cfg engine.Config) {
	t.Helper()
	layout := engine.NewLayout(cfg.Prefix, cfg.Pipeline)
	epoch := writerEpoch(t, ctx, reader, layout)
	var left []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		left = orphansBelow(t, ctx, reader, layout, epoch)
		if len(left) == 0 {
			return
		}
	}
	t.Errorf("orphans of older epochs left after the sweep: %q", left)
}

func writerEpoch(t *testing.T, ctx context.Context, reader *s3.Client, layout engine.Layout) uint64 {
	out, err := reader.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(layout.WriterKey())})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "epoch "); ok {
			epoch, err := strconv.ParseUint(v, 10, 64)
			if err == nil {
				return epoch
			}
		}
	}
	t.Fatalf("writer object without an epoch: %q", b)
	return 0
}

func orphansBelow(t *testing.T, ctx context.Context, reader *s3.Client, layout engine.Layout, epoch uint64) []string {
	type pair struct{ body, marker bool }
	ids := map[string]*pair{}
	p := s3.NewListObjectsV2Paginator(reader, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket), Prefix: aws.String(layout.SegmentsPrefix())})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			dir, id, kind, ok := layout.ParseKey(aws.ToString(o.Key))
			if !ok || id.Epoch >= epoch {
				continue
			}
			k := dir + id.String()
			if ids[k] == nil {
				ids[k] = &pair{}
			}
			ids[k].body = ids[k].body || kind == engine.KindBody
			ids[k].marker = ids[k].marker || kind == engine.KindMarker
		}
	}
	var left []string
	for k, p := range ids {
		if p.body && !p.marker {
			left = append(left, k+".seg")
		}
	}
	ups, err := reader.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(testBucket), Prefix: aws.String(layout.SegmentsPrefix())})
	if err == nil {
		for _, u := range ups.Uploads {
			if _, id, _, ok := layout.ParseKey(aws.ToString(u.Key)); ok && id.Epoch < epoch {
				left = append(left, "upload of "+aws.ToString(u.Key))
			}
		}
	} else if !strings.Contains(err.Error(), "NoSuchUpload") {
		t.Fatal(err) // gofakes3 answers NoSuchUpload for a bucket that never had one
	}
	return left
}
