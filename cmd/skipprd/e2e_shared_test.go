package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net/http"
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
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skipprd/skipprd/internal/pgtest"
	"github.com/skipprd/skipprd/storage"
)

// Two pipelines, one destination. Each pipeline has its own
// WAL, and every WAL numbers its snapshots from 000000000001-000000000001,
// so before WAL identities two daemons produced the same compaction ids
// for different rows, and every sink — which dedupes on the id alone —
// took the second pipeline's job for one it had already applied: its
// rows were lost, and nothing said so. These tests run two real daemons,
// pipelines a and b with DATA_DIRs of their own, into one Parquet
// folder, one bucket and one Postgres database; kill each with SIGKILL
// mid-stream; and require every row either pipeline acked in the
// destination exactly once. TestUpgradeAcrossCrash runs the last build
// before WAL identities, crashes it with jobs applied but their segments
// not yet reclaimed, and lets the current build recover that DATA_DIR:
// nothing may be applied twice.

// sharedDaemon is one pipeline's daemon: its runs on one DATA_DIR, one
// after the other, and the current run's HTTP source address.
type sharedDaemon struct {
	name    string // SKIPPR_PIPELINE, and the prefix of its rows' ids
	bin     string
	dataDir string
	env     []string
	addr    atomic.Value // "" while no run listens
	runs    []*proc      // the test goroutine's only
	acked   atomic.Int64 // requests answered 200
	// launched is when the current run was started (the test
	// goroutine's only).
	launched time.Time
}

func newSharedDaemon(bin, name, pipelineFile string, env ...string) *sharedDaemon {
	d := &sharedDaemon{name: name, bin: bin,
		env: append([]string{envPipeline + "=" + name, envPipelineFile + "=" + pipelineFile}, env...)}
	d.addr.Store("")
	return d
}

// start runs the daemon (again) on its DATA_DIR and waits for its HTTP
// source to listen.
func (d *sharedDaemon) start(t *testing.T) *proc {
	t.Helper()
	p := startDaemon(t, d.bin, d.dataDir, d.env...)
	d.runs = append(d.runs, p)
	p.waitStderr(t, "pipeline "+d.name+"'s HTTP source listening", func(lines []string) bool { return listenAddr(lines) != "" })
	d.addr.Store(listenAddr(p.stderrLines()))
	return p
}

func (d *sharedDaemon) current() *proc { return d.runs[len(d.runs)-1] }

// launch starts a run without waiting for it: listening says when it
// does. (A kill schedule must not wait for one daemon's restart while
// another's kill falls due.)
func (d *sharedDaemon) launch(t *testing.T) {
	t.Helper()
	d.runs = append(d.runs, startDaemon(t, d.bin, d.dataDir, d.env...))
	d.launched = time.Now()
}

// listening reports whether the current run's HTTP source listens (its
// address stored for the clients); a run that has not within
// listenWait fails t.
func (d *sharedDaemon) listening(t *testing.T) bool {
	t.Helper()
	if d.addr.Load().(string) != "" {
		return true
	}
	if a := listenAddr(d.current().stderrLines()); a != "" {
		d.addr.Store(a)
		return true
	}
	if time.Since(d.launched) > listenWait {
		t.Fatalf("pipeline %s: run %d does not listen after %v", d.name, len(d.runs)-1, listenWait)
	}
	return false
}

// listenWait bounds a restarted run's start, recovery before it included.
const listenWait = 2 * time.Minute

// kill is a crash of the current run (SIGKILL).
func (d *sharedDaemon) kill(t *testing.T) {
	t.Helper()
	d.addr.Store("")
	d.current().kill(t)
}

// stop waits for the current run's recovery (a run stopped before it
// leaves what it recovered in the WAL, not in the destination), then
// stops it with SIGINT: it drains, exit 0. A close waits for reclaims
// only engine.CloseReclaimGrace (10 s) and leaves the rest to the next
// start, which a loaded box can run past: then one more run must drain
// what the first left.
func (d *sharedDaemon) stop(t *testing.T) {
	t.Helper()
	for again := false; ; again = true {
		p := d.current()
		p.waitStderr(t, "pipeline "+d.name+"'s recovery", func(lines []string) bool { return findLine(lines, "msg=ready") != "" })
		p.stop(t)
		d.addr.Store("")
		last, ok := parseProgress(lastProgress(p.stdoutLines()))
		switch {
		case ok && last["live_segments"] == 0:
			return
		case ok && !again:
			t.Logf("pipeline %s: the graceful stop left %v segments to the next start (%q); one more run drains them",
				d.name, last["live_segments"], lastProgress(p.stdoutLines()))
			d.start(t)
		default:
			t.Errorf("pipeline %s: the graceful stop should drain its WAL; its last progress line: %q", d.name, lastProgress(p.stdoutLines()))
			return
		}
	}
}

// checkNoAlerts fails t for every engine alert any run of d logged.
func (d *sharedDaemon) checkNoAlerts(t *testing.T) {
	t.Helper()
	for i, p := range d.runs {
		for _, l := range p.stderrLines() {
			if strings.Contains(l, "engine alert") {
				t.Errorf("pipeline %s, run %d alerted: %s", d.name, i, l)
			}
		}
	}
}

// ingestRequestOf is client c's request i of pipeline name, posted to
// one of namespaces; its rows' ids are unique across pipelines.
func ingestRequestOf(name string, namespaces []string, c, i int) ingestRequest {
	r := ingestRequest{ns: namespaces[(c+i)%len(namespaces)], key: fmt.Sprintf("client-%d-request-%d", c, i)}
	var body bytes.Buffer
	for n := range 1 + (c*31+i*17)%20 {
		id := fmt.Sprintf("%s-c%02d-r%03d-%02d", name, c, i, n)
		r.ids = append(r.ids, id)
		fmt.Fprintf(&body, `{"id":%q,"n":%d,"p":%q}`+"\n", id, n, name)
	}
	r.body = body.Bytes()
	return r
}

// sharedLoad is the clients of one daemon: clients goroutines posting
// requests requests each, pausing up to pause between them; some
// requests are sent again after their 200 (a client that lost the
// answer), which must change nothing.
type sharedLoad struct {
	clients, requests int
	pause             time.Duration
	namespaces        []string
}

// ackedRows collects the ids of the rows answered 200, per namespace.
type ackedRows struct {
	mu   sync.Mutex
	byNS map[string][]string
}

func (a *ackedRows) add(ns string, ids []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byNS == nil {
		a.byNS = map[string][]string{}
	}
	a.byNS[ns] = append(a.byNS[ns], ids...)
}

// sorted returns a copy of the ids per namespace, each sorted.
func (a *ackedRows) sorted() map[string][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][]string{}
	for ns, ids := range a.byNS {
		out[ns] = slices.Sorted(slices.Values(ids))
	}
	return out
}

func (a *ackedRows) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, ids := range a.byNS {
		n += len(ids)
	}
	return n
}

// run starts the clients of l against d; the WaitGroup is done when
// every client has had each of its requests answered (or failed t).
func (l sharedLoad) run(t *testing.T, d *sharedDaemon, seed uint64, into *ackedRows, wg *sync.WaitGroup) {
	for c := range l.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for i := range l.requests {
				r := ingestRequestOf(d.name, l.namespaces, c, i)
				if !postAcked(t, &d.addr, r) {
					return
				}
				into.add(r.ns, r.ids)
				d.acked.Add(1)
				if (c+i)%5 == 0 {
					postAcked(t, &d.addr, r) // answered 200 again, stored once
				}
				if l.pause > 0 {
					time.Sleep(time.Duration(rng.Int64N(int64(l.pause))))
				}
			}
		}()
	}
}

// killSeed is the seed of a test's kill moments: SKIPPRD_E2E_KILL_SEED
// if set, else the clock; it is logged.
func killSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(envKillSeed); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envKillSeed, v, err)
		}
		seed = n
	}
	t.Logf("kill moments from seed %d (%s=%d draws them again)", seed, envKillSeed, seed)
	return seed
}

// sharedScenario is what a shared-destination test varies: the sinks
// block of the pipeline file, each daemon's extra environment and load,
// and how to read the destination back (ids per namespace, sorted,
// duplicates kept).
type sharedScenario struct {
	sinks string // the pipeline file's "sinks:" block; the sink is named sink
	sink  string
	env   map[string][]string // per pipeline
	load  map[string]sharedLoad
	kills int // per daemon
	// read returns the destination's ids per namespace; namespaces are
	// those the pipelines were acked rows of.
	read func(t *testing.T, namespaces []string) map[string][]string
}

var sharedPipelines = []string{"a", "b"}

// runIssue is the issue's reproduction: a acks 2 rows of namespace
// nsA, then b 3 rows of nsB, each its daemon's first request; both stop
// gracefully; the destination must hold all five rows.
func (s sharedScenario) runIssue(t *testing.T, bin, nsA, nsB string) {
	daemons := s.daemons(t, bin)
	for _, d := range daemons {
		d.start(t)
	}
	want := &ackedRows{}
	for i, d := range daemons {
		ns := []string{nsA, nsB}[i]
		r := ingestRequest{ns: ns, key: "order-42"} // one key: each pipeline's keys are its own
		var body bytes.Buffer
		for n := range 2 + i {
			r.ids = append(r.ids, fmt.Sprintf("%s-%d", d.name, n+1))
			fmt.Fprintf(&body, `{"id":%q,"n":%d,"p":%q}`+"\n", r.ids[n], n, d.name)
		}
		r.body = body.Bytes()
		if !postAcked(t, &d.addr, r) {
			t.FailNow()
		}
		want.add(ns, r.ids)
	}
	for _, d := range daemons {
		d.stop(t)
	}
	s.check(t, daemons, want)
}

// runKills runs both daemons under their loads, SIGKILLs each s.kills
// times at seeded moments — each once its clients have had a drawn
// number of requests answered since its last start (a tenth to a third
// of them all), plus up to 40 ms — restarting it on its DATA_DIR each
// time while the clients carry on, then stops both gracefully and checks
// the destination.
func (s sharedScenario) runKills(t *testing.T, bin string) {
	seed := killSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x5a4ed))
	daemons := s.daemons(t, bin)
	type kill struct {
		after int64 // requests answered since the run started
		delay time.Duration
	}
	describe := func(ks []kill) string {
		var out []string
		for _, k := range ks {
			out = append(out, fmt.Sprintf("%d answered + %v", k.after, k.delay.Round(time.Millisecond)))
		}
		return "[" + strings.Join(out, ", ") + "]"
	}
	plan := map[*sharedDaemon][]kill{}
	for _, d := range daemons {
		total := int64(s.load[d.name].clients * s.load[d.name].requests)
		var ks []kill
		for range s.kills {
			ks = append(ks, kill{total/10 + rng.Int64N(total/3-total/10), time.Duration(rng.Int64N(int64(40 * time.Millisecond)))})
		}
		plan[d] = ks
		t.Logf("pipeline %s: %d requests; each run killed after %s", d.name, total, describe(ks))
	}
	started := map[*sharedDaemon]int64{} // requests answered when the current run started
	for _, d := range daemons {
		d.start(t)
	}
	acked := &ackedRows{}
	var wg sync.WaitGroup
	for i, d := range daemons {
		s.load[d.name].run(t, d, seed+uint64(i)+1, acked, &wg)
	}
	clientsDone := make(chan struct{})
	go func() { wg.Wait(); close(clientsDone) }()
	// The test goroutine kills and restarts (startDaemon may fail t).
	due := map[*sharedDaemon]time.Time{} // when a daemon's next kill fires, once its share is answered
	for pending := true; pending; {
		pending = false
		for _, d := range daemons {
			ks := plan[d]
			if len(ks) == 0 {
				continue
			}
			pending = true
			if !d.listening(t) {
				continue
			}
			if due[d].IsZero() && d.acked.Load()-started[d] >= ks[0].after {
				due[d] = time.Now().Add(ks[0].delay)
			}
			if due[d].IsZero() || time.Now().Before(due[d]) {
				continue
			}
			d.kill(t)
			t.Logf("pipeline %s: run %d killed with %d requests answered (%d in this run)",
				d.name, len(d.runs)-1, d.acked.Load(), d.acked.Load()-started[d])
			plan[d], due[d] = ks[1:], time.Time{}
			started[d] = d.acked.Load()
			d.launch(t)
		}
		select {
		case <-clientsDone:
			// pending was taken before this pass fired its kills:
			// ask the plans again, or a last kill that fired in this
			// very pass reads as one that never did.
			var left []string
			for _, d := range daemons {
				if len(plan[d]) > 0 {
					left = append(left, d.name+" "+describe(plan[d]))
				}
			}
			if len(left) > 0 {
				t.Fatalf("the clients finished before every kill fired: %s left (make the load longer)", strings.Join(left, ", "))
			}
			pending = false
		case <-time.After(2 * time.Millisecond):
		}
	}
	for _, d := range daemons { // the last runs: the clients wait for them
		for !d.listening(t) {
			time.Sleep(2 * time.Millisecond)
		}
	}
	<-clientsDone
	for _, d := range daemons {
		d.stop(t)
	}
	s.check(t, daemons, acked)
}

// daemons makes pipelines a and b, each on a DATA_DIR of its own, with
// one pipeline file naming the shared sink and an HTTP source into it.
func (s sharedScenario) daemons(t *testing.T, bin string) []*sharedDaemon {
	pipeline := filepath.Join(t.TempDir(), "skipprd.yaml")
	writeFile(t, pipeline, s.sinks+"sources:\n  - {name: api, kind: http, sink: "+s.sink+", listen: \"127.0.0.1:0\"}\n")
	var out []*sharedDaemon
	for _, name := range sharedPipelines {
		d := newSharedDaemon(bin, name, pipeline, s.env[name]...)
		d.dataDir = t.TempDir()
		out = append(out, d)
	}
	return out
}

// check requires the destination to hold, per namespace, exactly the
// rows acked, and no run to have alerted.
func (s sharedScenario) check(t *testing.T, daemons []*sharedDaemon, acked *ackedRows) {
	t.Helper()
	if acked.total() == 0 {
		t.Fatal("nothing was acked")
	}
	want := acked.sorted()
	got := s.read(t, slices.Sorted(maps.Keys(want)))
	namespaces := map[string]bool{}
	for ns := range want {
		namespaces[ns] = true
	}
	for ns := range got {
		namespaces[ns] = true
	}
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		if diff := idsDiff(got[ns], want[ns]); diff != "" {
			t.Errorf("namespace %s: %s", ns, diff)
		} else {
			t.Logf("namespace %s: all %d acked rows once (%s)", ns, len(want[ns]), perPipeline(want[ns]))
		}
	}
	for _, d := range daemons {
		d.checkNoAlerts(t)
	}
	checkWALIdentities(t, daemons)
}

// checkWALIdentities: every run of a daemon that got ready named the
// same WAL id (the identity is recovered with its WAL, kill or not), and
// no two daemons named the same one.
func checkWALIdentities(t *testing.T, daemons []*sharedDaemon) {
	t.Helper()
	owner := map[string]string{}
	for _, d := range daemons {
		ids := map[string]bool{}
		for _, p := range d.runs {
			if line := findLine(p.stderrLines(), "msg=ready"); line != "" {
				_, id, _ := strings.Cut(line, "wal_id=")
				id, _, _ = strings.Cut(id, " ")
				ids[id] = true
			}
		}
		if len(ids) != 1 {
			t.Errorf("pipeline %s: its runs got ready with WAL ids %v, want one", d.name, slices.Sorted(maps.Keys(ids)))
		}
		for id := range ids {
			if len(id) != 32 || owner[id] != "" {
				t.Errorf("pipeline %s: WAL id %q (pipeline %q has it too)", d.name, id, owner[id])
			}
			owner[id] = d.name
		}
	}
}

// idsDiff describes how the ids got differ from want as multisets: ""
// when equal, else the counts of rows missing, held twice or more, and
// held but never acked, each with examples and per pipeline.
func idsDiff(got, want []string) string {
	count := map[string]int{}
	for _, id := range got {
		count[id]++
	}
	var missing, dups, foreign []string
	for _, id := range want {
		switch n := count[id]; {
		case n == 0:
			missing = append(missing, id)
		case n > 1:
			dups = append(dups, fmt.Sprintf("%s×%d", id, n))
		}
		delete(count, id)
	}
	for id := range count {
		foreign = append(foreign, id)
	}
	if len(missing) == 0 && len(dups) == 0 && len(foreign) == 0 {
		return ""
	}
	slices.Sort(foreign)
	return fmt.Sprintf("the destination holds %d rows (%s), the acked requests %d (%s): %d acked rows missing (%s; first %s), %d held more than once (first %s), %d never acked (first %s)",
		len(got), perPipeline(got), len(want), perPipeline(want), len(missing), perPipeline(missing), firstFew(missing),
		len(dups), firstFew(dups), len(foreign), firstFew(foreign))
}

// perPipeline counts ids by their pipeline prefix ("a-…", "b-…").
func perPipeline(ids []string) string {
	n := map[string]int{}
	for _, id := range ids {
		p, _, _ := strings.Cut(id, "-")
		n[p]++
	}
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s: %d", p, n[p]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func firstFew(ids []string) string {
	if len(ids) == 0 {
		return "-"
	}
	return strings.Join(ids[:min(5, len(ids))], " ")
}

// lakeFiles counts the Parquet files under a lake folder, per namespace.
func lakeFiles(t *testing.T, lake string) map[string]int {
	t.Helper()
	if tables := icebergLake(t, lake); tables != nil {
		out := map[string]int{}
		for name, r := range tables {
			out[name] = len(r.Files)
		}
		return out
	}
	paths, err := filepath.Glob(filepath.Join(lake, "*", "p_year=*", "p_month=*", "p_day=*", "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range paths {
		rel, _ := filepath.Rel(lake, p)
		out[strings.Split(filepath.ToSlash(rel), "/")[0]]++
	}
	return out
}

// skipShortOrWindows skips an end-to-end test under -short (what says
// what it runs) and on Windows, where the daemon cannot be stopped with
// SIGINT.
func skipShortOrWindows(t *testing.T, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what)
	}
	if runtime.GOOS == "windows" {
		t.Skip("stops the daemon with SIGINT")
	}
}

// The loads of the lake tests: on the local-disk WAL a request is acked
// at an fsync, so the clients pause between requests to make the stream
// outlast the kills; on the S3 WAL each waits for a segment commit.
var (
	diskLoad = sharedLoad{clients: 4, requests: 50, pause: 25 * time.Millisecond, namespaces: []string{"events"}}
	s3Load   = sharedLoad{clients: 6, requests: 12, namespaces: []string{"events"}}
)

// TestSharedLakeDir: pipelines a and b, each on its own local-disk WAL,
// both write namespace events into one parquet-dir sink, lake, at one
// absolute folder.
func TestSharedLakeDir(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and runs two pipelines through kills (about 15 s)")
	t.Parallel()
	bin := buildDaemon(t)
	scenario := func(t *testing.T) sharedScenario {
		lake := filepath.Join(t.TempDir(), "shared-lake") // absolute: outside both DATA_DIRs
		return sharedScenario{
			sinks: fmt.Sprintf("sinks:\n  lake: {kind: parquet-dir, path: %q}\n", lake),
			sink:  "lake",
			load:  map[string]sharedLoad{"a": diskLoad, "b": diskLoad},
			kills: 2,
			read: func(t *testing.T, _ []string) map[string][]string {
				t.Logf("lake files per namespace: %v", lakeFiles(t, lake))
				return lakeIDs(t, lake)
			},
		}
	}
	t.Run("issue", func(t *testing.T) { scenario(t).runIssue(t, bin, "events", "events") })
	t.Run("kills", func(t *testing.T) { scenario(t).runKills(t, bin) })
}

// sharedS3Timeout is the S3 request timeout of the S3 test's daemons: a
// loopback bucket, so each start-up's recovery fence is 2 s + 1/3 s.
const sharedS3Timeout = "2"

// TestSharedLakeS3: the same into one parquet-s3 sink, on one gofakes3
// bucket, which also holds both WALs: a runs the local-disk WAL with its
// segments in the bucket (wal/a/…), b the S3 WAL (wal/b/…); the lake is
// under lake/.
func TestSharedLakeS3(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and runs two pipelines on one bucket through kills (about 25 s)")
	t.Parallel()
	bin := buildDaemon(t)
	const bucket = "shared"
	scenario := func(t *testing.T) sharedScenario {
		emb, err := storage.StartEmbeddedS3(filepath.Join(t.TempDir(), "s3.bolt"), bucket, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = emb.Close() })
		base := append(s3Env(t, emb.Endpoint()), envWALBucket+"="+bucket, envS3Timeout+"="+sharedS3Timeout)
		return sharedScenario{
			sinks: "sinks:\n  lake: {kind: parquet-s3, bucket: " + bucket + ", prefix: lake/}\n",
			sink:  "lake",
			env: map[string][]string{
				"a": append(slices.Clone(base), envWALStorage+"=disk"),
				"b": append(slices.Clone(base), envWALStorage+"=s3"),
			},
			load:  map[string]sharedLoad{"a": diskLoad, "b": s3Load},
			kills: 2,
			read: func(t *testing.T, _ []string) map[string][]string {
				lake, keys := downloadLake(t, emb.Client(), bucket, "lake/")
				t.Logf("bucket keys: %s", keys)
				return lakeIDs(t, lake)
			},
		}
	}
	t.Run("issue", func(t *testing.T) { scenario(t).runIssue(t, bin, "events", "events") })
	t.Run("kills", func(t *testing.T) { scenario(t).runKills(t, bin) })
}

// downloadLake copies every object under prefix into a folder, at its key
// less the prefix, for lakeIDs; it also summarises the bucket's keys by
// their first two path elements.
func downloadLake(t *testing.T, client *s3.Client, bucket, prefix string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	groups := map[string]int{}
	pages := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatalf("list %s: %v", bucket, err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			parts := strings.SplitN(key, "/", 3)
			groups[strings.Join(parts[:min(2, len(parts))], "/")]++
			rel, ok := strings.CutPrefix(key, prefix)
			if !ok {
				continue
			}
			obj, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			if err != nil {
				t.Fatalf("get %s: %v", key, err)
			}
			body, err := io.ReadAll(obj.Body)
			obj.Body.Close()
			if err != nil {
				t.Fatalf("get %s: %v", key, err)
			}
			path := filepath.Join(dir, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, body, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var summary []string
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		summary = append(summary, fmt.Sprintf("%s/…: %d", g, groups[g]))
	}
	return dir, strings.Join(summary, ", ")
}

// TestSharedPostgres: pipelines a and b, each on its own local-disk WAL,
// into one postgres sink, warehouse, on one database: a ingests
// namespace alpha, b namespace beta (the issue's case), and both the
// shared table events. The tables must hold every acked row once (by
// id), and skipprd_applied_jobs must account for them: per table, its
// jobs' rows add up to the table's rows.
func TestSharedPostgres(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and runs two pipelines into Postgres through kills (about 15 s)")
	pgtest.Connect(t) // skips loudly without a server (fails under CI=true)
	t.Parallel()
	bin := buildDaemon(t)
	scenario := func(t *testing.T) sharedScenario {
		url := pgtest.Database(t)
		conn := connectPG(t, url)
		return sharedScenario{
			sinks: "sinks:\n  warehouse: {kind: postgres, url_env: E2E_PG}\n",
			sink:  "warehouse",
			env:   map[string][]string{"a": {"E2E_PG=" + url}, "b": {"E2E_PG=" + url}},
			load: map[string]sharedLoad{
				"a": {clients: 4, requests: 50, pause: 25 * time.Millisecond, namespaces: []string{"alpha", "events"}},
				"b": {clients: 4, requests: 50, pause: 25 * time.Millisecond, namespaces: []string{"beta", "events"}},
			},
			kills: 2,
			read:  func(t *testing.T, tables []string) map[string][]string { return readWarehouse(t, conn, tables...) },
		}
	}
	t.Run("issue", func(t *testing.T) { scenario(t).runIssue(t, bin, "alpha", "beta") })
	t.Run("kills", func(t *testing.T) { scenario(t).runKills(t, bin) })
}

// readWarehouse reads the ids of each table (sorted, duplicates kept),
// failing t for a table that does not exist, and checks the applied-jobs
// table against them: per table, the rows of its jobs add up to the
// table's rows, and no job names another table.
func readWarehouse(t *testing.T, conn *pgx.Conn, tables ...string) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[string][]string{}
	for _, table := range tables {
		rows, err := conn.Query(ctx, "SELECT id FROM "+pgx.Identifier{table}.Sanitize())
		ids, err := collectText(rows, err)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
			t.Errorf("table %s does not exist: %v", table, err)
			continue
		}
		if err != nil {
			t.Fatalf("read table %s: %v", table, err)
		}
		slices.Sort(ids)
		out[table] = ids
	}
	jobs, err := conn.Query(ctx, "SELECT table_name, count(*), coalesce(sum(rows), 0)::int8 FROM skipprd_applied_jobs WHERE table_name <> '' GROUP BY table_name ORDER BY table_name")
	if err != nil {
		t.Fatalf("read skipprd_applied_jobs: %v", err)
	}
	type applied struct{ jobs, rows int64 }
	byTable := map[string]applied{}
	for jobs.Next() {
		var (
			name string
			a    applied
		)
		if err := jobs.Scan(&name, &a.jobs, &a.rows); err != nil {
			t.Fatalf("read skipprd_applied_jobs: %v", err)
		}
		byTable[name] = a
	}
	if err := jobs.Err(); err != nil {
		t.Fatalf("read skipprd_applied_jobs: %v", err)
	}
	for name, a := range byTable {
		if !slices.Contains(tables, name) {
			t.Errorf("skipprd_applied_jobs names table %s (%d jobs, %d rows), which no pipeline wrote", name, a.jobs, a.rows)
		}
	}
	for _, table := range tables {
		ids, ok := out[table]
		if !ok {
			continue
		}
		if a := byTable[table]; a.rows != int64(len(ids)) {
			t.Errorf("skipprd_applied_jobs: %d jobs of %d rows in all into table %s, which holds %d rows", a.jobs, a.rows, table, len(ids))
		} else {
			t.Logf("table %s: %d rows; skipprd_applied_jobs: %d jobs, %d rows", table, len(ids), a.jobs, a.rows)
		}
	}
	return out
}

func collectText(rows pgx.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// preIdentityCommit is the last build before WAL identities:
// its compaction ids are hash(snapshot id, sink, ordinals), the same in
// every WAL. TestUpgradeAcrossCrash runs it, then the current build, on
// one DATA_DIR.
const preIdentityCommit = "6fa47ad466c3048d6ef72018183f40c38e685215"

// buildAtCommit builds the daemon as it was at commit, from `git archive`
// into a temporary folder (the repository is only read). It skips t,
// loudly, when git or the commit is not there (a shallow clone) — under
// CI=true too: that is the only reason it skips.
func buildAtCommit(t *testing.T, commit string) string {
	t.Helper()
	gitTool, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("SKIPPING: no git on PATH to extract the daemon at commit %s: %v", commit, err)
	}
	top, err := exec.Command(gitTool, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("SKIPPING: not in a git checkout, so the daemon at commit %s cannot be extracted: %v", commit, err)
	}
	root := strings.TrimSpace(string(top))
	if out, err := exec.Command(gitTool, "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		t.Skipf("SKIPPING: commit %s is not in this clone (a shallow clone? git fetch --unshallow): %v %s", commit, err, out)
	}
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go tool on PATH to build the daemon at %s: %v", commit, err)
	}
	src := t.TempDir()
	archive := exec.Command(gitTool, "-C", root, "archive", "--format=tar", commit)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	var archiveErr, untarErr bytes.Buffer
	archive.Stderr, untar.Stderr = &archiveErr, &untarErr
	if err := untar.Start(); err != nil {
		t.Fatalf("tar: %v", err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", commit, err, archiveErr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("tar -x the archive of %s: %v\n%s", commit, err, untarErr.String())
	}
	bin := filepath.Join(t.TempDir(), "skipprd-"+commit[:7])
	// Built as the current build is (no -trimpath), so that it shares
	// the Go build cache's compiled dependencies with it: on a cold cache
	// it compiles only what differs (about 30 s on 2 cores; with
	// -trimpath, every dependency again: nearly 4 minutes).
	build := exec.Command(gotool, "build", "-o", bin, "./cmd/skipprd")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build at %s: %v\n%s", commit, err, out)
	}
	return bin
}

// upgradeTrials is how many crashes of the old build the current build
// recovers from, each on a DATA_DIR of its own.
const upgradeTrials = 3

// TestUpgradeAcrossCrash: the pre-identity build ingests over HTTP into
// a parquet-dir lake (and, when a Postgres server answers, a second
// namespace into a postgres sink) and is SIGKILLed while a segment whose
// jobs were (partly) applied is still live — its admin API's tape shows
// applied PARTs; then the current build starts on the same DATA_DIR
// while the clients carry on (retrying what the crash left unanswered),
// recovers, drains and stops. Every acked row must be in its destination
// exactly once: the current build must recognise the jobs the old one
// applied.
func TestUpgradeAcrossCrash(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon at an older commit and upgrades across crashes (about 25 s)")
	t.Parallel()
	began := time.Now()
	old := buildAtCommit(t, preIdentityCommit)
	t.Logf("built the daemon at %s in %v", preIdentityCommit, time.Since(began).Round(time.Millisecond))
	cur := buildDaemon(t)
	withPG := true
	if _, err := pgtest.Probe(context.Background()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and PostgreSQL does not answer (%v)", err)
		}
		withPG = false
		t.Logf("SKIPPING the postgres sink of this test: PostgreSQL does not answer (%v); the lake alone is upgraded", err)
	}
	var hits atomic.Int64
	t.Run("trials", func(t *testing.T) {
		for trial := range upgradeTrials {
			t.Run(fmt.Sprint(trial), func(t *testing.T) {
				t.Parallel() // mostly waits for flushes and drains
				if upgradeTrial(t, trial, old, cur, withPG) {
					hits.Add(1)
				}
			})
		}
	})
	if hits := hits.Load(); hits == 0 {
		t.Fatalf("in none of %d trials was a segment with applied jobs still in the WAL after the kill: the upgrade's crash window was never hit", upgradeTrials)
	}
	t.Logf("%d of %d trials crashed with applied jobs' segments still live", hits.Load(), upgradeTrials)
}

// upgradeTrial runs one crash of the old build and the current build's
// recovery; it reports whether segments with applied jobs were still in
// the WAL after the kill.
func upgradeTrial(t *testing.T, trial int, old, cur string, withPG bool) bool {
	dataDir := t.TempDir()
	pipeline := filepath.Join(t.TempDir(), "skipprd.yaml")
	namespaces := []string{"events"}
	env := slices.Clone(quickLake) // the older build does not read them: it takes a job per segment
	var conn *pgx.Conn
	sinksYAML := "sinks:\n  lake: {kind: parquet-dir, path: lake}\n"
	source := "  - {name: api, kind: http, sink: lake, listen: \"127.0.0.1:0\"}\n"
	if withPG {
		url := pgtest.Database(t)
		conn = connectPG(t, url)
		env = append(env, "E2E_PG="+url)
		namespaces = append(namespaces, "ledger")
		sinksYAML += "  warehouse: {kind: postgres, url_env: E2E_PG}\n"
		source = "  - {name: api, kind: http, sink: lake, listen: \"127.0.0.1:0\", namespaces: {events: {}, ledger: {sink: warehouse}}}\n"
	}
	writeFile(t, pipeline, sinksYAML+"sources:\n"+source)
	d := newSharedDaemon(old, "default", pipeline, env...)
	d.dataDir = dataDir
	p := d.start(t)
	admin := adminAddr(t, p)

	// Clients post until told to stop; each request is retried with its
	// key until answered, across the kill and the upgrade.
	acked := &ackedRows{}
	var stopping atomic.Bool
	var wg sync.WaitGroup
	for c := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stopping.Load(); i++ {
				r := ingestRequestOf(fmt.Sprintf("t%d", trial), namespaces, c, i)
				if !postAcked(t, &d.addr, r) {
					return
				}
				acked.add(r.ns, r.ids)
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	// Kill the old build the moment its tape shows a live segment with
	// applied PARTs: jobs applied, segment not yet reclaimed.
	var applied, shown []string // ids of the segments with applied PARTs; what they showed
	var liveAtKill int
	p.waitFor(t, "a live segment with applied jobs", func() bool {
		code, body := get(t, "http://"+admin+"/api/live")
		if code != http.StatusOK {
			return false
		}
		var live liveState
		if err := json.Unmarshal([]byte(body), &live); err != nil {
			t.Fatalf("/api/live: %v: %s", err, body)
		}
		for _, s := range live.Segments {
			if s.State == "applying" || s.State == "reclaiming" {
				applied = append(applied, s.ID)
				var parts []string
				for _, p := range s.Parts {
					parts = append(parts, fmt.Sprintf("%s %d rows applied=%v", p.Namespace, p.Rows, p.Applied))
				}
				shown = append(shown, fmt.Sprintf("%s %s [%s]", s.ID, s.State, strings.Join(parts, ", ")))
			}
		}
		liveAtKill = len(live.Segments)
		return len(applied) > 0
	})
	d.kill(t)
	markers := segmentObjects(t, filepath.Join(dataDir, segmentsDir), ".seg.commit.o")
	bitmaps := segmentObjects(t, filepath.Join(dataDir, segmentsDir), ".seg.scbl.o")
	var still []string
	for _, id := range applied {
		if slices.Contains(markers, id) {
			still = append(still, id)
		}
	}
	t.Logf("trial %d: the old build killed with %d rows acked, %d live segments on its tape, with applied jobs: %s; after the kill %d segments live in the store %v (bitmaps written: %v), %d of them with applied jobs; lake files %v",
		trial, acked.total(), liveAtKill, strings.Join(shown, "; "), len(markers), markers, bitmaps, len(still), lakeFiles(t, filepath.Join(dataDir, "lake")))

	// The upgrade: the current build on the same DATA_DIR.
	d.bin = cur
	p = d.start(t)
	p.waitStderr(t, "the current build's recovery", func(lines []string) bool { return findLine(lines, "msg=ready") != "" })
	before := acked.total()
	p.waitFor(t, "new acks after the upgrade", func() bool { return acked.total() > before+100 })
	stopping.Store(true)
	wg.Wait()
	d.stop(t)
	d.checkNoAlerts(t)

	want := acked.sorted()
	got := lakeIDs(t, filepath.Join(dataDir, "lake"))
	for ns, ids := range got {
		if ns != "events" {
			t.Errorf("trial %d: the lake holds namespace %s (%d rows), which was not sent to it", trial, ns, len(ids))
		}
	}
	if diff := idsDiff(got["events"], want["events"]); diff != "" {
		t.Errorf("trial %d: lake events: %s", trial, diff)
	}
	if withPG {
		tables := readWarehouse(t, conn, "ledger")
		if diff := idsDiff(tables["ledger"], want["ledger"]); diff != "" {
			t.Errorf("trial %d: table ledger: %s", trial, diff)
		}
	}
	t.Logf("trial %d: %d rows acked across the upgrade (events %d, ledger %d)", trial, acked.total(), len(want["events"]), len(want["ledger"]))
	return len(still) > 0
}

// adminAddr is the admin listener's address from a run's log.
func adminAddr(t *testing.T, p *proc) string {
	t.Helper()
	var addr string
	p.waitStderr(t, "the admin listener", func(lines []string) bool {
		_, a, ok := strings.Cut(findLine(lines, `msg="admin listening"`), " addr=")
		addr, _, _ = strings.Cut(a, " ")
		return ok
	})
	return addr
}

// segmentObjects lists the snapshot ids of the objects of a local segment
// store whose files end in suffix: ".seg.commit.o" for the commit markers
// (the segments still live), ".seg.scbl.o" for completion bitmaps.
func segmentObjects(t *testing.T, store, suffix string) []string {
	t.Helper()
	var ids []string
	err := filepath.WalkDir(store, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if id, ok := strings.CutSuffix(e.Name(), suffix); ok && !e.IsDir() {
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("list the segment store: %v", err)
	}
	slices.Sort(ids)
	return ids
}
