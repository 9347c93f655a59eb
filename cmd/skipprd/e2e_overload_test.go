package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/s3proxy"
)

// Overload (issue 24, point 5): HTTP sources offering far more than a
// slow sink takes, to a daemon with a small memory hint. The real
// binary, on the S3 WAL, writes a parquet-s3 lake (a job per segment);
// WAL and lake share one in-memory bucket (internal/s3proxy), reached
// through a front of this test's own that holds each PUT of a lake
// file for overloadPutDelay while the sink is slow, and passes every
// other request at once.
//
// The memory hint: the daemon sizes its pool from MemAvailable lowered
// to its container's cgroup headroom, read at the cgroup root (docs/OPERATING.md
// "Running the daemon", docs/DESIGN.md §10, storage/memory_cgroup.go); no variable
// sets it. So the daemon runs in a mount namespace of its own where
// /sys/fs/cgroup shows a cgroup v2 limited to overloadHint with nothing
// charged to it — what a container of that limit shows a process that
// has not allocated yet, held still so that the pool stays put. Its
// pool is 70% of that.
//
// What a slow sink does to ingest, by design: a unit is acked once its
// segment commits, so admission memory frees at once; the committed
// segments the sink has not applied wait in the WAL (in the bucket),
// and at engine.DefaultLiveSegmentsMax of them every new unit is
// refused (ErrResourceExhausted: HTTP 429 with Retry-After). A short
// WAL_MAX_DELAY_SECONDS seals a segment every few milliseconds, so the
// backlog fills in seconds, not the minutes 4 MiB segments would take.
//
// Checked:
//   - the clients offer ≥ 10× the rows the sink applies in the slow
//     phase, measured, not assumed: the rows of every POST sent in it
//     (a retry of a refused request is load offered again) against the
//     daemon's skipprd_rows_applied_total over the same interval;
//   - they get 429s, each with a Retry-After, honour it, and retry each
//     request with its own Idempotency-Key and body until answered 200;
//   - the daemon's RSS — VmRSS sampled every 100 ms and the kernel's
//     high-water mark VmHWM — stays within its idle RSS + its pool + a
//     fixed margin (overloadMargin, justified there);
//   - once the sink is fast again ingest resumes: acks go on while the
//     clients keep pushing, and once the backlog has drained a fresh
//     round of requests, one per client at once, is answered 200 with
//     no 429;
//   - after a graceful stop every row answered 200 is in the lake
//     exactly once, and nothing else is.
//
// The mount namespace needs root (CAP_SYS_ADMIN); the test skips loudly
// without it (and off Linux), and fails under CI=true.
func TestDaemonOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon and overloads it for about 40 s")
	}
	if runtime.GOOS != "linux" {
		t.Skipf("SKIPPING: the overload test gives the daemon its memory hint through a Linux mount namespace and reads /proc; this is %s", runtime.GOOS)
	}
	t.Parallel()
	bin := withMemoryHint(t, buildDaemon(t), overloadHint)

	store := s3proxy.Start(t, overloadBucket)
	front := startSlowFront(t, store.URL, "/"+overloadBucket+"/lake/", overloadPutDelay)
	pipeline := filepath.Join(t.TempDir(), "skipprd.yaml")
	writeFile(t, pipeline, "sinks:\n  lake: {kind: parquet-s3, bucket: "+overloadBucket+", prefix: lake/, file_bytes: 0}\n"+
		"sources:\n  - {name: api, kind: http, sink: lake, listen: \"127.0.0.1:0\"}\n")
	env := append(s3Env(t, front.URL), envPipelineFile+"="+pipeline, envMaxDelay+"=0.005",
		envWALStorage+"=s3", envWALBucket+"="+overloadBucket, envS3Timeout+"=2")

	d := startDaemon(t, bin, t.TempDir(), env...)
	d.waitStderr(t, "the HTTP source listening", func(lines []string) bool { return listenAddr(lines) != "" })
	d.waitStderr(t, "recovery done", func(lines []string) bool { return findLine(lines, "msg=ready") != "" })
	addr, admin := listenAddr(d.stderrLines()), "http://"+adminAddr(t, d)
	pid := d.cmd.Process.Pid
	checkMemoryHint(t, d, pid, overloadHint)

	// Idle: the same daemon, ready, before any load.
	idle := idleMemory(t, pid, time.Second)
	m := scrapeEngine(t, admin)
	pool := int64(m["skipprd_memory_pool_bytes"])
	if pool <= 0 || pool > overloadHint/100*70 {
		t.Fatalf("the daemon's pool is %d bytes; want 70%% of its %d-byte hint", pool, int64(overloadHint))
	}
	t.Logf("memory hint %d MiB; idle: VmRSS %.1f MiB (anon %.1f, file %.1f), pool %.1f MiB (admission %.1f MiB, body cache %.1f MiB)",
		overloadHint>>20, inMiB(idle.rss), inMiB(idle.anon), inMiB(idle.file), inMiB(pool),
		inMiB(int64(m["skipprd_admission_limit_bytes"])), inMiB(int64(m["skipprd_body_cache_limit_bytes"])))

	load := &overloadLoad{addr: addr}
	// The clients stop before the daemon does (cleanups run last first),
	// on every path: a client must not report into a finished test.
	t.Cleanup(load.stopAndWait)
	rss := sampleMemory(pid, 100*time.Millisecond, func() int { return int(load.phase.Load()) })
	watch := watchMetrics(admin, 200*time.Millisecond)

	// The slow phase: from the first POST until the clients have met
	// backpressure for overloadSaturated.
	front.setSlow(true)
	slowStart, appliedBefore := time.Now(), scrapeEngine(t, admin)
	load.start(t, overloadClients)
	var appliedAt429 metrics
	deadline := slowStart.Add(overloadSlowMax)
	for !load.saturatedFor(overloadSaturated) {
		if appliedAt429 == nil && load.first429.Load() != 0 {
			appliedAt429 = scrapeEngine(t, admin)
		}
		if time.Now().After(deadline) {
			last := watch.last()
			t.Fatalf("no backpressure held for %v within %v of overload: %d rows offered, %d acked, %d answers 429; live segments %.0f, units rejected %.0f",
				overloadSaturated, overloadSlowMax, load.offered[phaseFill].Load(), load.acked[phaseFill].Load(), load.refused[phaseFill].Load(),
				last["skipprd_live_segments"], last["skipprd_units_rejected_total"])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if appliedAt429 == nil {
		appliedAt429 = scrapeEngine(t, admin)
	}
	appliedAfter := scrapeEngine(t, admin)
	load.phase.Store(phaseRecover)
	front.setSlow(false)
	slowFor := time.Since(slowStart)
	saturatedFor := time.Since(time.Unix(0, load.first429.Load()))

	rowsApplied := func(from, to metrics) int64 {
		return int64(to.sum("skipprd_rows_applied_total") - from.sum("skipprd_rows_applied_total"))
	}
	offered := load.offered[phaseFill].Load() + load.offered[phaseSaturated].Load()
	applied := rowsApplied(appliedBefore, appliedAfter)
	jobs := int64(appliedAfter.sum("skipprd_jobs_applied_total") - appliedBefore.sum("skipprd_jobs_applied_total"))
	puts, held := front.slowed()
	refused := load.refused[phaseFill].Load() + load.refused[phaseSaturated].Load()
	t.Logf("slow phase %v: %d sink PUTs held (%.2f s each on average), %d jobs applied, %d rows (%.0f rows/s); "+
		"the clients offered %d rows (%.0f rows/s), %d acked; %d answers 429 (the first after %v, at %.0f live segments), %d 503",
		slowFor.Round(time.Millisecond), puts, held.Seconds()/float64(max(puts, 1)), jobs, applied, float64(applied)/slowFor.Seconds(),
		offered, float64(offered)/slowFor.Seconds(), load.acked[phaseFill].Load()+load.acked[phaseSaturated].Load(),
		refused, time.Unix(0, load.first429.Load()).Sub(slowStart).Round(time.Millisecond), appliedAt429["skipprd_live_segments"],
		load.unavailable[phaseFill].Load()+load.unavailable[phaseSaturated].Load())
	ratio := float64(offered) / float64(max(applied, 1))
	satOffered, satApplied := load.offered[phaseSaturated].Load(), rowsApplied(appliedAt429, appliedAfter)
	t.Logf("offered/applied over the slow phase: %d/%d = %.1f×; in its last %v, under backpressure: %d/%d = %.1f×",
		offered, applied, ratio, saturatedFor.Round(time.Millisecond), satOffered, satApplied, float64(satOffered)/float64(max(satApplied, 1)))
	if applied <= 0 {
		t.Errorf("the sink applied nothing in the slow phase: slow, not stopped, is the case here")
	}
	if ratio < 10 {
		t.Errorf("the clients offered %d rows while the sink applied %d: %.1f×, want ≥ 10×", offered, applied, ratio)
	}
	if refused == 0 {
		t.Errorf("no 429 during the slow phase")
	}
	backlog := int64(watch.max("skipprd_segment_bytes"))
	t.Logf("backpressure from the WAL's backlog: at most %.0f live segments (limit %d) of %.1f MiB; admission used at most %.1f MiB of %.1f MiB",
		watch.max("skipprd_live_segments"), engine.DefaultLiveSegmentsMax, inMiB(backlog),
		inMiB(int64(watch.max("skipprd_admission_used_bytes"))), inMiB(int64(watch.max("skipprd_admission_limit_bytes"))))
	if backlog <= pool+overloadMargin {
		t.Errorf("the backlog held %d bytes, no more than pool + margin (%d): a daemon that kept it all in memory would pass the memory check",
			backlog, pool+overloadMargin)
	}
	if n := load.noRetryAfter.Load(); n > 0 {
		t.Errorf("%d answers 429 or 503 without a Retry-After", n)
	}

	// The sink is fast again; the clients keep pushing a while: acks go
	// on. Then they finish their requests (each until 200).
	recoverStart := time.Now()
	time.Sleep(overloadRecover)
	load.stopAndWait()
	recoverFor := time.Since(recoverStart)
	t.Logf("sink fast again, %v more of the same load: %d rows acked (%.0f rows/s; %.0f rows/s under backpressure), %d answers 429",
		recoverFor.Round(time.Millisecond), load.acked[phaseRecover].Load(), float64(load.acked[phaseRecover].Load())/recoverFor.Seconds(),
		float64(load.acked[phaseSaturated].Load())/saturatedFor.Seconds(), load.refused[phaseRecover].Load())
	recovered := float64(load.acked[phaseRecover].Load()) / recoverFor.Seconds()
	if throttled := float64(load.acked[phaseSaturated].Load()) / saturatedFor.Seconds(); recovered <= throttled {
		t.Errorf("after the sink was fast again %.0f rows/s acked, under backpressure %.0f: ingest did not resume", recovered, throttled)
	}

	// The sink catches up: the backlog drains; then a fresh round, one
	// request per client at once, is answered 200 at the first try.
	load.phase.Store(phaseDrain)
	stopped := time.Now()
	caughtUp := waitScrape(t, admin, fmt.Sprintf("the backlog down to %d segments", overloadCaughtUp), func(m metrics) bool {
		return m["skipprd_live_segments"] <= overloadCaughtUp
	})
	t.Logf("the sink caught up (live segments ≤ %d) %v after the load stopped", overloadCaughtUp, time.Since(stopped).Round(time.Millisecond))
	load.phase.Store(phaseProbe)
	load.probe(t, overloadClients)
	if n, m := load.refused[phaseProbe].Load(), load.unavailable[phaseProbe].Load(); n+m > 0 {
		t.Errorf("after the sink caught up, %d fresh requests (of %d) were answered 429, %d 503", n, overloadClients, m)
	}

	load.phase.Store(phaseStop)
	d.stop(t)
	watch.stop()
	peak, perPhase, samples := rss.stop()

	// Memory: never above idle + pool + margin (overloadMargin says
	// what the margin is made of).
	bound := idle.rss + pool + overloadMargin
	t.Logf("RSS: idle %.1f MiB, peak %.1f MiB (VmHWM; the largest of %d VmRSS samples %.1f MiB: anon %.1f, file %.1f); "+
		"bound idle + pool %.1f MiB + margin %d MiB = %.1f MiB",
		inMiB(idle.rss), inMiB(peak.hwm), samples, inMiB(peak.rss), inMiB(peak.anon), inMiB(peak.file), inMiB(pool), overloadMargin>>20, inMiB(bound))
	t.Logf("at most: admission used %.1f MiB, body cache %.1f MiB; Go heap allocated %.1f MiB, in use %.1f MiB, next GC at %.1f MiB, from the OS %.1f MiB",
		inMiB(int64(watch.max("skipprd_admission_used_bytes"))), inMiB(int64(watch.max("skipprd_body_cache_used_bytes"))),
		inMiB(int64(watch.max("go_memstats_heap_alloc_bytes"))), inMiB(int64(watch.max("go_memstats_heap_inuse_bytes"))),
		inMiB(int64(watch.max("go_memstats_next_gc_bytes"))), inMiB(int64(watch.max("go_memstats_sys_bytes"))))
	var byPhase []string
	for p, r := range perPhase {
		if r > 0 { // a phase shorter than a sample has none
			byPhase = append(byPhase, fmt.Sprintf("%s %.1f", overloadPhaseNames[p], inMiB(r)))
		}
	}
	t.Logf("largest VmRSS per phase, MiB: %s", strings.Join(byPhase, ", "))
	heap := func(m metrics) string {
		return fmt.Sprintf("%.1f/%.1f MiB", inMiB(int64(m["go_memstats_heap_alloc_bytes"])), inMiB(int64(m["go_memstats_next_gc_bytes"])))
	}
	t.Logf("Go heap allocated/next GC: idle %s, at %.0f live segments %s, at %.0f %s",
		heap(m), appliedAfter["skipprd_live_segments"], heap(appliedAfter), caughtUp["skipprd_live_segments"], heap(caughtUp))
	if samples < 10 {
		t.Errorf("only %d RSS samples", samples)
	}
	if top := max(peak.hwm, peak.rss); top > bound {
		t.Errorf("peak RSS %d bytes (%.1f MiB) over idle %d + pool %d + margin %d = %d bytes (%.1f MiB)",
			top, inMiB(top), idle.rss, pool, int64(overloadMargin), bound, inMiB(bound))
	}

	// Nothing lost, nothing twice.
	want := load.ackedIDs()
	lake, keys := downloadLake(t, overloadS3Client(store.URL), overloadBucket, "lake/")
	got := lakeIDs(t, lake)["events"]
	t.Logf("%d rows acked in %d requests; bucket: %s", len(want), load.requests.Load(), keys)
	if !slices.Equal(got, want) {
		t.Fatalf("the lake holds %d rows, the 200'd requests %d: %s", len(got), len(want), firstDiff(got, want))
	}
}

const (
	overloadBucket = "skipprd-overload"
	// overloadHint is the memory the daemon is told it has: a pool of
	// 89.6 MiB (admission 71.7, body cache 17.9).
	overloadHint = 128 << 20
	// overloadPutDelay holds each lake PUT in the slow phase: with a job
	// per segment and one job at a time per lane, the sink applies a
	// segment every 2 s, while the WAL commits one every few ms.
	overloadPutDelay = 2 * time.Second
	overloadClients  = 32
	overloadRows     = 10 // rows per request
	// overloadRowBytes pads each row: the full backlog holds some
	// 200 MiB of segment bodies (Arrow, not compressed), more than the
	// memory bound itself, so only the body cache's eviction keeps the
	// daemon within it (checked: the backlog's bytes exceed pool +
	// margin).
	overloadRowBytes = 8192
	// overloadThink is a client's mean pause between a 200 and its next
	// request. Offered/applied under backpressure is about (request
	// cycle) × (segments committed a second) × overloadPutDelay, as a
	// segment holds what arrived in its few ms, and a refused client
	// waits its Retry-After: 0.11 s × ~100/s × 2 s, some 20×. Before
	// the backlog is full everything offered is taken and the ratio is
	// about (segments a second) × overloadPutDelay; over the whole slow
	// phase it came out at 72-77× (the first segments, the ones the
	// sink applies, hold the clients' opening burst).
	overloadThink = 100 * time.Millisecond
	// overloadSaturated: how long backpressure must have held before
	// the slow phase ends; overloadSlowMax bounds the wait for it.
	overloadSaturated = 3 * time.Second
	overloadSlowMax   = 2 * time.Minute // about 15 s idle; a CI box busy with other daemons took 33 s
	overloadRecover   = 2 * time.Second
	// overloadCaughtUp: live segments at which the sink has caught up.
	overloadCaughtUp = 8
	// overloadMargin is what the daemon may hold beyond its idle RSS
	// and its pool. Outside the pool, live:
	//   - the lake's Parquet encoding: arrow-go pools its zstd encoders,
	//     each with a 16 MiB history window and ~5.5 MiB of tables, and
	//     a pooled one outlives a GC, so two can be live: ~43 MiB (a heap
	//     profile of this scenario, the daemon run in-process: 21.5 MiB
	//     an encoder);
	//   - requests in flight: 32 bodies of ~80 KiB, read, decoded to
	//     Arrow and encoded for the WAL: under 5 MiB;
	// some 48 MiB. The daemon sets no Go memory limit, so with GOGC=100
	// the heap grows to twice what is live before the GC runs: those
	// 48 MiB may take 96 MiB of RSS. The pool's own bytes get the same
	// slack; here it fits in the pool's unused part, as a slow sink
	// leaves admission empty (a unit leaves it when its segment
	// commits) and only the body cache (17.9 of the 89.6 MiB) fills.
	// Code pages first touched under load (RssFile) added 2-5 MiB in
	// the runs measured.
	overloadMargin = 96 << 20
)

// Phases of the load, in order.
const (
	phaseFill      = iota // the sink slow, no 429 yet
	phaseSaturated        // the sink slow, since the first 429
	phaseRecover          // the sink fast again, the load goes on
	phaseDrain            // the load stopped, the backlog draining
	phaseProbe            // the fresh round after the sink caught up
	phaseStop             // the graceful stop
	overloadPhases
)

var overloadPhaseNames = [overloadPhases]string{"fill", "backpressure", "recover", "drain", "probe", "stop"}

// overloadLoad is the clients: each posts request after request, each
// until answered 200, honouring Retry-After, and counts what it offered
// and what it got per phase (the phase at the time the POST is sent).
type overloadLoad struct {
	addr         string
	phase        atomic.Int32
	offered      [overloadPhases]atomic.Int64 // rows in every POST sent
	acked        [overloadPhases]atomic.Int64 // rows answered 200
	refused      [overloadPhases]atomic.Int64 // answers 429
	unavailable  [overloadPhases]atomic.Int64 // answers 503
	noRetryAfter atomic.Int64                 // 429/503 without a Retry-After
	requests     atomic.Int64                 // requests answered 200
	first429     atomic.Int64                 // unix ns of the first 429, 0 before
	halt         atomic.Bool
	wg           sync.WaitGroup
	mu           sync.Mutex
	ids          []string // rows answered 200
}

func (l *overloadLoad) start(t *testing.T, clients int) {
	for c := range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; !l.halt.Load(); i++ {
				if !l.post(t, overloadRequest(fmt.Sprintf("c%02d", c), i)) {
					return
				}
				// A pause of its own: clients in step would all
				// wait for one segment, and the WAL would see one
				// segment per round trip instead of a stream.
				time.Sleep(rand.N(2 * overloadThink))
			}
		}()
	}
}

func (l *overloadLoad) stopAndWait() {
	l.halt.Store(true)
	l.wg.Wait()
}

// probe posts one fresh request per client, all at once, each until 200.
func (l *overloadLoad) probe(t *testing.T, clients int) {
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.post(t, overloadRequest(fmt.Sprintf("p%02d", c), 0))
		}()
	}
	wg.Wait()
}

// saturatedFor reports whether the first 429 came at least d ago.
func (l *overloadLoad) saturatedFor(d time.Duration) bool {
	first := l.first429.Load()
	return first != 0 && time.Since(time.Unix(0, first)) >= d
}

func (l *overloadLoad) ackedIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := slices.Clone(l.ids)
	slices.Sort(ids)
	return ids
}

// overloadRequest is client's request i: its key and rows are a
// function of (client, i).
func overloadRequest(client string, i int) ingestRequest {
	r := ingestRequest{ns: "events", key: fmt.Sprintf("overload-%s-%06d", client, i)}
	var body bytes.Buffer
	for n := range overloadRows {
		id := fmt.Sprintf("%s-%06d-%03d", client, i, n)
		r.ids = append(r.ids, id)
		fmt.Fprintf(&body, `{"id":%q,"n":%d,"note":%q}`+"\n", id, n, strings.Repeat(id+" ", overloadRowBytes/(len(id)+1)))
	}
	r.body = body.Bytes()
	return r
}

// overloadClient: an attempt that gets no answer within the timeout is
// sent again with the same key.
var overloadClient = &http.Client{Timeout: 30 * time.Second}

// post sends r until it is answered 200 stating its row count; 429 and
// 503 wait their Retry-After. It reports false (and fails t) for any
// other answer, or none within e2eWait.
func (l *overloadLoad) post(t *testing.T, r ingestRequest) bool {
	deadline := time.Now().Add(e2eWait)
	for time.Now().Before(deadline) {
		phase := l.phase.Load()
		l.offered[phase].Add(int64(len(r.ids)))
		req, _ := http.NewRequest(http.MethodPost, "http://"+l.addr+"/v1/ingest/"+r.ns, bytes.NewReader(r.body))
		req.Header.Set("Content-Type", "application/x-ndjson")
		req.Header.Set("Idempotency-Key", r.key)
		resp, err := overloadClient.Do(req)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			var ans struct{ Rows int }
			if err := json.Unmarshal(msg, &ans); err != nil || ans.Rows != len(r.ids) {
				t.Errorf("request %s (%d rows) answered 200 %s", r.key, len(r.ids), msg)
				return false
			}
			l.acked[phase].Add(int64(len(r.ids)))
			l.requests.Add(1)
			l.mu.Lock()
			l.ids = append(l.ids, r.ids...)
			l.mu.Unlock()
			return true
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			if resp.StatusCode == http.StatusTooManyRequests {
				l.refused[phase].Add(1)
				if l.first429.CompareAndSwap(0, time.Now().UnixNano()) {
					l.phase.CompareAndSwap(phaseFill, phaseSaturated)
				}
			} else {
				l.unavailable[phase].Add(1)
			}
			wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			if err != nil || wait < 1 {
				l.noRetryAfter.Add(1)
				wait = 1
			}
			time.Sleep(time.Duration(wait) * time.Second)
		default:
			t.Errorf("request %s answered %d: %s", r.key, resp.StatusCode, msg)
			return false
		}
	}
	t.Errorf("request %s not acked within %v", r.key, e2eWait)
	return false
}

// slowFront is an S3 endpoint in front of another that holds every PUT
// under slowPath for delay while slow — a sink that takes each file,
// slowly — and passes everything else at once. Turning slow off
// releases the PUTs it holds.
type slowFront struct {
	URL      string
	slowPath string // the PUTs held: those whose path starts with it
	delay    time.Duration
	mu       sync.Mutex
	fast     chan struct{} // closed while not slow
	puts     atomic.Int64  // PUTs held
	held     atomic.Int64  // ns they were held in all
}

func startSlowFront(t *testing.T, target, slowPath string, delay time.Duration) *slowFront {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	f := &slowFront{delay: delay, slowPath: slowPath, fast: make(chan struct{})}
	close(f.fast)
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, f.slowPath) {
			f.mu.Lock()
			fast := f.fast
			f.mu.Unlock()
			select {
			case <-fast:
			default:
				start := time.Now()
				select {
				case <-time.After(f.delay):
				case <-fast:
				case <-r.Context().Done():
				}
				f.puts.Add(1)
				f.held.Add(int64(time.Since(start)))
			}
		}
		rp.ServeHTTP(w, r)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	f.URL = "http://" + ln.Addr().String()
	return f
}

func (f *slowFront) setSlow(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.fast:
		if on {
			f.fast = make(chan struct{})
		}
	default:
		if !on {
			close(f.fast)
		}
	}
}

func (f *slowFront) slowed() (int64, time.Duration) {
	return f.puts.Load(), time.Duration(f.held.Load())
}

// overloadS3Client reads the store behind the front, as a user would.
func overloadS3Client(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

// withMemoryHint returns an executable that runs bin with a memory
// hint of hint bytes: in a mount namespace of its own (unshare), with a
// folder bind-mounted over /sys/fs/cgroup that holds what a cgroup v2
// limited to hint with nothing charged yet shows — memory.max,
// memory.current, memory.stat — the files the daemon reads first
// (storage/memory_cgroup.go). The wrapper execs, so its pid is the
// daemon's. Without root (or unshare) the test skips, loudly; under
// CI=true it fails.
func withMemoryHint(t *testing.T, bin string, hint int64) string {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", msg)
		}
		t.Skipf("SKIPPING: %s", msg)
	}
	if os.Geteuid() != 0 {
		unavailable("the daemon's memory hint is a cgroup view in a mount namespace of its own: this test needs root (CAP_SYS_ADMIN)")
	}
	for _, tool := range []string{"sh", "unshare", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable("no %s on PATH to give the daemon its memory hint with", tool)
		}
	}
	if fi, err := os.Stat("/sys/fs/cgroup"); err != nil || !fi.IsDir() {
		unavailable("no /sys/fs/cgroup to mount the daemon's memory hint over (%v)", err)
	}
	if out, err := exec.Command("unshare", "--mount", "--propagation", "private", "true").CombinedOutput(); err != nil {
		unavailable("cannot make a mount namespace (unshare --mount: %v %s)", err, out)
	}
	dir := t.TempDir()
	cgroup := filepath.Join(dir, "cgroup")
	if err := os.Mkdir(cgroup, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cgroup, "memory.max"), strconv.FormatInt(hint, 10)+"\n")
	writeFile(t, filepath.Join(cgroup, "memory.current"), "0\n")
	writeFile(t, filepath.Join(cgroup, "memory.stat"), "anon 0\nfile 0\ninactive_file 0\n")
	for _, p := range []string{cgroup, bin} {
		if strings.ContainsRune(p, '\'') {
			t.Fatalf("path %q has a quote", p)
		}
	}
	wrapper := filepath.Join(dir, "skipprd-with-hint")
	writeFile(t, wrapper, fmt.Sprintf(`#!/bin/sh
# The daemon with a memory hint: its cgroup root shows a limit of %[3]d bytes.
exec unshare --mount --propagation private sh -c 'mount --bind "$0" /sys/fs/cgroup && exec "$1"' '%[1]s' '%[2]s'
`, cgroup, bin, hint))
	if err := os.Chmod(wrapper, 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper
}

// checkMemoryHint: pid is the daemon (the wrapper exec'd it), and it
// sized its memory from the hint.
func checkMemoryHint(t *testing.T, d *proc, pid int, hint int64) {
	t.Helper()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) != "skipprd" {
		t.Fatalf("pid %d is %q (%v), not the daemon", pid, comm, err)
	}
	line := findLine(d.stderrLines(), `msg="skipprd configured"`)
	_, v, _ := strings.Cut(line, "memory_available_bytes=")
	v, _, _ = strings.Cut(v, " ")
	if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 || n > hint {
		t.Fatalf("the daemon saw %q bytes available, not at most its hint %d: %s", v, hint, line)
	}
}

// procMem is one reading of /proc/<pid>/status, in bytes.
type procMem struct {
	rss, hwm   int64 // VmRSS, VmHWM
	anon, file int64 // RssAnon, RssFile
}

// readProcMem reads pid's /proc/<pid>/status.
func readProcMem(pid int) (procMem, error) {
	var m procMem
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	defer f.Close()
	fields := map[string]*int64{"VmRSS": &m.rss, "VmHWM": &m.hwm, "RssAnon": &m.anon, "RssFile": &m.file}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, _ := strings.Cut(sc.Text(), ":")
		into, ok := fields[name]
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return m, fmt.Errorf("/proc/%d/status %s: %q", pid, name, rest)
		}
		*into = kb << 10
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if m.rss == 0 || m.hwm == 0 {
		return m, fmt.Errorf("/proc/%d/status: no VmRSS or VmHWM", pid)
	}
	return m, nil
}

// idleMemory is the reading with the largest VmRSS of pid over d,
// sampled every 100 ms.
func idleMemory(t *testing.T, pid int, d time.Duration) procMem {
	t.Helper()
	var top procMem
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		m, err := readProcMem(pid)
		if err != nil {
			t.Fatal(err)
		}
		if m.rss > top.rss {
			top = m
		}
	}
	return top
}

// memSampler reads pid's memory every tick until stopped (or the
// process is gone: the last readings stand), keeping the largest VmRSS
// of each phase.
type memSampler struct {
	done     chan struct{}
	finished chan struct{}
	peak     procMem // the sample with the largest VmRSS, with the last VmHWM read
	perPhase [overloadPhases]int64
	samples  int
}

func sampleMemory(pid int, every time.Duration, phase func() int) *memSampler {
	s := &memSampler{done: make(chan struct{}), finished: make(chan struct{})}
	go func() {
		defer close(s.finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			if m, err := readProcMem(pid); err == nil {
				hwm := max(s.peak.hwm, m.hwm)
				if m.rss > s.peak.rss {
					s.peak = m
				}
				s.peak.hwm = hwm
				p := phase()
				s.perPhase[p] = max(s.perPhase[p], m.rss)
				s.samples++
			}
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop returns the peak readings, the largest VmRSS of each phase and
// how many samples were taken.
func (s *memSampler) stop() (procMem, [overloadPhases]int64, int) {
	close(s.done)
	<-s.finished
	return s.peak, s.perPhase, s.samples
}

// metricsWatch scrapes /metrics until stopped, keeping each series'
// largest and last value.
type metricsWatch struct {
	done     chan struct{}
	finished chan struct{}
	mu       sync.Mutex
	maxima   metrics
	latest   metrics
}

func watchMetrics(base string, every time.Duration) *metricsWatch {
	w := &metricsWatch{done: make(chan struct{}), finished: make(chan struct{}), maxima: metrics{}, latest: metrics{}}
	go func() {
		defer close(w.finished)
		for {
			if m, err := scrapeMetricsOnce(base); err == nil {
				w.mu.Lock()
				w.latest = m
				for k, v := range m {
					w.maxima[k] = max(w.maxima[k], v)
				}
				w.mu.Unlock()
			}
			select {
			case <-w.done:
				return
			case <-time.After(every):
			}
		}
	}()
	return w
}

func (w *metricsWatch) stop() { close(w.done); <-w.finished }

func (w *metricsWatch) max(name string) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxima[name]
}

func (w *metricsWatch) last() metrics {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest
}

// scrapeMetricsOnce reads /metrics once; an error for no answer (the daemon may
// be stopping).
func scrapeMetricsOnce(base string) (metrics, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %d %v", resp.StatusCode, err)
	}
	m := metrics{}
	for line := range strings.Lines(string(body)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, nil
}

func scrapeEngine(t *testing.T, base string) metrics {
	t.Helper()
	m, err := scrapeMetricsOnce(base)
	if err != nil {
		t.Fatal(err)
	}
	if m["skipprd_engine_stats_up"] != 1 {
		t.Fatalf("/metrics without the engine's stats: %v", m)
	}
	return m
}

// waitScrape scrapes until ok holds, for at most e2eWait, and returns
// the scrape that held.
func waitScrape(t *testing.T, base, what string, ok func(metrics) bool) metrics {
	t.Helper()
	deadline := time.Now().Add(e2eWait)
	for {
		m := scrapeEngine(t, base)
		if ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v: live_segments %.0f", what, e2eWait, m["skipprd_live_segments"])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func inMiB(n int64) float64 { return float64(n) / (1 << 20) }
