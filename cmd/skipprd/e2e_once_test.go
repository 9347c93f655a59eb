package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/internal/brokertest"
	"github.com/skipprd/skipprd/internal/pgtest"
	"github.com/skipprd/skipprd/storage"
)

// skipprd run --once end to end: the real binary, real files, a
// parquet-dir lake; each run must exit on its own.

// onceFolder is a pipeline file of a files source over conf/incoming
// into a parquet-dir lake at lake, and a way to drop the files of
// dropFile into it; want gathers the ids of every file dropped.
type onceFolder struct {
	conf, pipeline, lake string
	want                 []string
}

func newOnceFolder(t *testing.T, lake string) *onceFolder {
	t.Helper()
	f := &onceFolder{conf: t.TempDir(), lake: lake}
	if err := os.MkdirAll(filepath.Join(f.conf, "incoming"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.pipeline = filepath.Join(f.conf, "skipprd.yaml")
	writeFile(t, f.pipeline, "sinks:\n  lake: {kind: parquet-dir, path: "+lake+"}\nsources:\n"+
		"  - {name: drops, kind: files, path: "+filepath.Join(f.conf, "incoming")+", namespace: drops, sink: lake, in_flight: 2}\n")
	return f
}

// add drops files [from, to), renamed into view.
func (f *onceFolder) add(t *testing.T, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		body, ids := dropFile(i)
		f.want = append(f.want, ids...)
		name := fmt.Sprintf("f%03d.%s", i, []string{"csv", "jsonl"}[i%2])
		tmp := filepath.Join(f.conf, "incoming", "."+name)
		writeFile(t, tmp, string(body))
		if err := os.Rename(tmp, filepath.Join(f.conf, "incoming", name)); err != nil {
			t.Fatal(err)
		}
	}
}

// check requires the lake to hold every row dropped exactly once.
func (f *onceFolder) check(t *testing.T, after string) {
	t.Helper()
	want := slices.Sorted(slices.Values(f.want))
	if got := lakeIDs(t, f.lake)["drops"]; !slices.Equal(got, want) {
		t.Fatalf("%s: the lake holds %d rows, the files %d: %s", after, len(got), len(want), firstDiff(got, want))
	}
}

// onceOnDisk readies a parallel test of run --once on the local-disk
// WAL: the binary, a DATA_DIR, a folder of files [0, files) into the
// lake under it, and the environment.
func onceOnDisk(t *testing.T, files int) (bin, dataDir string, f *onceFolder, env []string) {
	t.Helper()
	skipShortOrWindows(t, "builds and runs the daemon")
	t.Parallel()
	bin, dataDir = buildDaemon(t), t.TempDir()
	f = newOnceFolder(t, filepath.Join(dataDir, "lake"))
	f.add(t, 0, files)
	return bin, dataDir, f, []string{envPipelineFile + "=" + f.pipeline}
}

// startOnce starts skipprd run --once.
func startOnce(t *testing.T, bin, dataDir string, env ...string) *proc {
	t.Helper()
	return startCommand(t, bin, []string{"run", "--once"}, dataDir, env...)
}

// exitCode waits for the process to exit on its own within e2eWait.
func (p *proc) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		var exit *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &exit):
			return exit.ExitCode()
		}
		t.Fatalf("waiting for the daemon: %v", err)
	case <-time.After(e2eWait):
		t.Fatalf("run --once still running after %v", e2eWait)
	}
	return -1
}

// runOnce runs skipprd run --once to its end and requires exit code want.
func runOnce(t *testing.T, bin, dataDir string, want int, env ...string) *proc {
	t.Helper()
	p := startOnce(t, bin, dataDir, env...)
	if code := p.exitCode(t); code != want {
		t.Fatalf("run --once exited %d, want %d; stderr:\n%s", code, want, strings.Join(p.stderrLines(), "\n"))
	}
	return p
}

// checkOnceDone requires a run's last progress line to show nothing live
// and ingested rows as asked (-1: any), and its log to say it is done.
func checkOnceDone(t *testing.T, p *proc, ingested int) {
	t.Helper()
	last, _ := parseProgress(lastProgress(p.stdoutLines()))
	if last["live_segments"] != 0 || last["acked"] != last["ingested"] || ingested >= 0 && last["ingested"] != uint64(ingested) {
		t.Fatalf("last progress line %q: want live_segments=0, every ingested row acked, ingested=%d", lastProgress(p.stdoutLines()), ingested)
	}
	if findLine(p.stderrLines(), "once: done") == "" {
		t.Fatalf("no \"once: done\" in the log:\n%s", strings.Join(p.stderrLines(), "\n"))
	}
}

// TestOnceFiles: run --once on a folder of files exits 0 with every row
// in the lake once and nothing live in the WAL; files added after, and a
// second run, bring exactly the new rows; a third run with nothing new
// ingests nothing.
func TestOnceFiles(t *testing.T) {
	bin, dataDir, f, env := onceOnDisk(t, 10)
	p := runOnce(t, bin, dataDir, 0, env...)
	checkOnceDone(t, p, len(f.want))
	f.check(t, "the first run")
	checkWALEmpty(t, inspectWorld{bin: bin, dataDir: dataDir, env: env})
	before := len(f.want)
	f.add(t, 10, 14)
	p = runOnce(t, bin, dataDir, 0, env...)
	checkOnceDone(t, p, len(f.want)-before)
	f.check(t, "the second run")
	p = runOnce(t, bin, dataDir, 0, env...)
	checkOnceDone(t, p, 0)
	f.check(t, "a run with nothing new")
}

// TestOnceFilesKilled: a first run --once SIGKILLed while it ingests (or
// while it applies), a run to completion, new files, a second run: the
// lake holds every row exactly once.
func TestOnceFilesKilled(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and kills it mid-run")
	t.Parallel()
	bin := buildDaemon(t)
	for _, at := range []string{"objects source: object ingested", "applying it to the sinks"} {
		t.Run(at, func(t *testing.T) {
			dataDir := t.TempDir()
			f := newOnceFolder(t, filepath.Join(dataDir, "lake"))
			env := []string{envPipelineFile + "=" + f.pipeline}
			f.add(t, 0, 40)
			if p := startOnce(t, bin, dataDir, env...); !p.killAt(t, at) {
				t.Fatalf("the first run ended before %q: nothing was killed", at)
			}
			p := runOnce(t, bin, dataDir, 0, env...)
			checkOnceDone(t, p, -1)
			f.check(t, "the run after the kill")
			checkWALEmpty(t, inspectWorld{bin: bin, dataDir: dataDir, env: env})
			before := len(f.want)
			f.add(t, 40, 45)
			p = runOnce(t, bin, dataDir, 0, env...)
			checkOnceDone(t, p, len(f.want)-before)
			f.check(t, "the second run")
		})
	}
}

// killAt SIGKILLs p once its log shows msg; it reports whether the kill
// came before the run ended on its own (then it must have exited 0).
// checkWALEmpty requires skipprd inspect, from outside, to find nothing
// left in the WAL after a once run: no live segment, no acked unit the
// log holds outside one, no orphan, no upload.
func checkWALEmpty(t *testing.T, w inspectWorld) {
	t.Helper()
	r := w.report(t)
	if len(r.Segments) != 0 || r.Log == nil || r.Log.UnflushedUnits != 0 || len(r.Orphans) != 0 || len(r.Uploads) != 0 {
		t.Fatalf("inspect after the run: %d live segments, log %+v, %d orphans, %d uploads; want an empty WAL",
			len(r.Segments), r.Log, len(r.Orphans), len(r.Uploads))
	}
	if len(r.Offsets.Committed) == 0 {
		t.Fatalf("inspect after the run: no committed offsets; the run's progress is lost")
	}
}

func (p *proc) killAt(t *testing.T, msg string) bool {
	t.Helper()
	deadline := time.Now().Add(e2eWait)
	for findLine(p.stderrLines(), msg) == "" {
		select {
		case err := <-p.exited:
			p.exited <- err
			if err != nil {
				t.Fatalf("run --once exited (%v) before %q", err, msg)
			}
			return false
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %v", msg, e2eWait)
		}
	}
	p.kill(t)
	return true
}

// TestOnceS3WALFreshContainer: WAL_STORAGE=s3 on a gofakes3 bucket, each
// run on a new empty DATA_DIR (a container started afresh): the WAL and
// the source's offsets live in the bucket, so the second run ingests
// only the files added since, and the lake (outside DATA_DIR) holds each
// row once.
func TestOnceS3WALFreshContainer(t *testing.T) {
	skipShortOrWindows(t, "builds and runs the daemon on an S3 WAL")
	t.Parallel()
	const bucket = "once-wal"
	emb, err := storage.StartEmbeddedS3(filepath.Join(t.TempDir(), "s3.bolt"), bucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emb.Close() })
	bin := buildDaemon(t)
	f := newOnceFolder(t, filepath.Join(t.TempDir(), "lake"))
	env := append(s3Env(t, emb.Endpoint()), envPipelineFile+"="+f.pipeline, envWALStorage+"=s3",
		envWALBucket+"="+bucket, envS3Timeout+"=2")
	f.add(t, 0, 8)
	p := runOnce(t, bin, filepath.Join(t.TempDir(), "fresh"), 0, env...)
	checkOnceDone(t, p, len(f.want))
	f.check(t, "the first run")
	before := len(f.want)
	f.add(t, 8, 12)
	p = runOnce(t, bin, filepath.Join(t.TempDir(), "fresh"), 0, env...)
	checkOnceDone(t, p, len(f.want)-before)
	f.check(t, "the second run")
}

// TestOnceRefusesSourcesWithoutEnd: an HTTP source (and the built-in
// generator, without a pipeline file) in once mode exits 2 with a
// message naming the source and why, before DATA_DIR is created; skipprd
// check with SKIPPR_ONCE=true reports the same.
func TestOnceRefusesSourcesWithoutEnd(t *testing.T) {
	skipShortOrWindows(t, "builds and runs the daemon")
	t.Parallel()
	bin := buildDaemon(t)
	conf := t.TempDir()
	pipeline := filepath.Join(conf, "skipprd.yaml")
	writeFile(t, pipeline, "sinks:\n  lake: {kind: parquet-dir, path: lake}\nsources:\n"+
		"  - {name: api, kind: http, listen: 127.0.0.1:0, sink: lake}\n")
	for _, c := range []struct {
		name string
		args []string
		env  []string
		want []string
	}{
		{"http", []string{"run", "--once"}, []string{envPipelineFile + "=" + pipeline},
			[]string{`source \"api\" (kind http) cannot run with SKIPPR_ONCE=true`, "an HTTP endpoint holds nothing at start"}},
		{"http by the variable", []string{"run"}, []string{envPipelineFile + "=" + pipeline, envOnce + "=true"},
			[]string{`source \"api\" (kind http) cannot run with SKIPPR_ONCE=true`}},
		{"generator", []string{"run", "--once"}, nil,
			[]string{"no pipeline file", `source \"demo\" (kind generator)`, "has no end to reach"}},
		{"check", []string{"check"}, []string{envPipelineFile + "=" + pipeline, envOnce + "=true"},
			[]string{`source "api" (kind http) cannot run with SKIPPR_ONCE=true`}},
		{"check --once", []string{"check", "--once", pipeline}, nil,
			[]string{pipeline + `:4: source "api" (kind http) cannot run with SKIPPR_ONCE=true`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "data")
			p := startCommand(t, bin, c.args, dataDir, c.env...)
			if code := p.exitCode(t); code != exitUsage {
				t.Fatalf("%v exited %d, want %d", c.args, code, exitUsage)
			}
			out := strings.Join(append(p.stdoutLines(), p.stderrLines()...), "\n")
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
			if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("DATA_DIR %s: %v; want it never created", dataDir, err)
			}
		})
	}
}

// TestOnceFailingSink: a lake that refuses every write (its namespace's
// folder is a file) makes run --once exit 1 naming the sink; what was
// acked stays in the WAL, and once the lake is fixed the next run
// applies it without ingesting anything again.
func TestOnceFailingSink(t *testing.T) {
	bin, dataDir, f, env := onceOnDisk(t, 5)
	blocker := filepath.Join(f.lake, "drops")
	if err := os.MkdirAll(f.lake, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, blocker, "not a folder")
	p := runOnce(t, bin, dataDir, 1, env...)
	failed := findLine(p.stderrLines(), "once: stopped with segments left in the WAL")
	if !strings.Contains(failed, "op=\"sink lake/drops\"") || !strings.Contains(failed, "live_segments=") {
		t.Fatalf("the failing run should name the sink lake/drops and what is left:\n%s", strings.Join(p.stderrLines(), "\n"))
	}
	// Once the host has stopped nothing retries, and the log does not
	// say it does.
	lines := p.stderrLines()
	for i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "once: stopped with segments left") }); i < len(lines); i++ {
		if strings.Contains(lines[i], "; retrying") {
			t.Fatalf("after the host stopped the log says it retries: %s", lines[i])
		}
	}
	// What was acked is in the WAL, as inspect sees it from outside: the
	// drops parts pending.
	w := inspectWorld{bin: bin, dataDir: dataDir, env: env}
	r := w.report(t)
	if len(r.Segments) == 0 || r.Segments[0].Applied == len(r.Segments[0].Parts) {
		t.Fatalf("inspect after the failing run: %d live segments (first: %+v); want the drops parts pending", len(r.Segments), r.Segments)
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	p = runOnce(t, bin, dataDir, 0, env...)
	checkOnceDone(t, p, 0) // nothing ingested again: the WAL held it
	f.check(t, "the run after the sink was fixed")
	checkWALEmpty(t, w)
}

// TestOncePostgresCDC: run --once on a postgres-cdc source into a
// parquet-dir lake — the first run takes the table's snapshot, the
// second streams the inserts, updates and deletes made since, the third
// finds nothing new — and the lake holds each snapshot row and each
// change exactly once (lakeCDC), nothing else.
// oncePG is a Postgres table of rows rows published for a postgres-cdc
// source into a parquet-dir lake under dataDir, and the daemon's
// environment for it; exec runs SQL on the source database.
type oncePG struct {
	bin, dataDir, lake string
	env                []string
	exec               func(sqls ...string)
}

func newOncePG(t *testing.T, table string, rows int) *oncePG {
	pgtest.RequireLogical(t)
	t.Parallel()
	srcURL := pgtest.Database(t)
	src := connectPG(t, srcURL)
	slot := uniqueSlot("once")
	t.Cleanup(func() { dropSlots(t, src, slot) })
	o := &oncePG{bin: buildDaemon(t), dataDir: t.TempDir()}
	o.lake = filepath.Join(o.dataDir, "lake")
	o.exec = func(sqls ...string) {
		t.Helper()
		for _, q := range sqls {
			if _, err := src.Exec(context.Background(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	o.exec(fmt.Sprintf("CREATE TABLE %s (id int8 PRIMARY KEY, v text)", table),
		fmt.Sprintf("INSERT INTO %s SELECT g, 'v' || g FROM generate_series(1, %d) g", table, rows),
		fmt.Sprintf("CREATE PUBLICATION %s_pub FOR TABLE %s", table, table))
	pipeline := filepath.Join(t.TempDir(), "skipprd.yaml")
	writeFile(t, pipeline, "sinks:\n  lake: {kind: parquet-dir, path: lake}\nsources:\n"+
		"  - {name: db, kind: postgres-cdc, sink: lake, url_env: ONCE_SRC, publication: "+table+"_pub, slot: "+slot+"}\n")
	o.env = []string{envPipelineFile + "=" + pipeline, "ONCE_SRC=" + srcURL}
	return o
}

// checkLake requires the lake to hold snapshot rows of the snapshot and
// changes rows above it, each once (lakeCDC fails on a record there
// twice).
func (o *oncePG) checkLake(t *testing.T, after string, snapshot, changes int) {
	t.Helper()
	gotSnapshot, gotChanges := 0, 0
	for _, rec := range lakeCDC(t, o.lake) {
		if rec.order == 0 {
			gotSnapshot++
		} else {
			gotChanges++
		}
	}
	if gotSnapshot != snapshot || gotChanges != changes {
		t.Fatalf("after %s: the lake holds %d snapshot rows and %d changes; want %d and %d", after, gotSnapshot, gotChanges, snapshot, changes)
	}
}

func TestOncePostgresCDC(t *testing.T) {
	skipShortOrWindows(t, "builds and runs the daemon on a Postgres table")
	o := newOncePG(t, "once_rows", 300)
	runs := []struct {
		what     string
		sqls     []string
		snapshot int // records at order token 0 in the lake after the run
		changes  int // records above it
		ingested int
	}{
		{"the snapshot", nil, 300, 0, 300},
		{"the changes since", []string{"INSERT INTO once_rows SELECT g, 'v' || g FROM generate_series(301, 340) g",
			"UPDATE once_rows SET v = 'x' WHERE id <= 10", "DELETE FROM once_rows WHERE id > 335"}, 300, 55, 55},
		{"nothing new", nil, 300, 55, 0},
	}
	for _, r := range runs {
		o.exec(r.sqls...)
		p := runOnce(t, o.bin, o.dataDir, 0, o.env...)
		checkOnceDone(t, p, r.ingested)
		o.checkLake(t, r.what, r.snapshot, r.changes)
	}
}

// TestOncePostgresCDCKilled: the first run is killed -9 in the middle
// (while the snapshot is read, or while it is applied); the next runs
// deliver the table exactly once, then only the changes since.
func TestOncePostgresCDCKilled(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and kills it mid-run on a Postgres table")
	for i, at := range []string{"msg=ready", "applying it to the sinks"} {
		t.Run(at, func(t *testing.T) {
			table := fmt.Sprintf("once_killed_%d", i)
			o := newOncePG(t, table, 20000)
			p := startOnce(t, o.bin, o.dataDir, o.env...)
			if !p.killAt(t, at) {
				t.Fatalf("the first run ended before %q: nothing was killed", at)
			}
			p = runOnce(t, o.bin, o.dataDir, 0, o.env...)
			checkOnceDone(t, p, -1)
			o.checkLake(t, "the run after the kill", 20000, 0)
			o.exec(fmt.Sprintf("INSERT INTO %s SELECT g, 'v' || g FROM generate_series(20001, 20030) g", table),
				fmt.Sprintf("UPDATE %s SET v = 'x' WHERE id <= 5", table))
			p = runOnce(t, o.bin, o.dataDir, 0, o.env...)
			checkOnceDone(t, p, 35)
			o.checkLake(t, "the second run", 20000, 35)
		})
	}
}

// onceKills are where a broker test's first run is killed -9: not at
// all, right after recovery (while the source reads), and once every
// source is done (while the close applies).
var onceKills = []string{"", "msg=ready", "applying it to the sinks"}

func TestOnceNATS(t *testing.T) {
	skipShortOrWindows(t, "builds and runs the daemon on a NATS stream")
	t.Parallel()
	url := brokertest.NATS(t)
	for _, kill := range onceKills {
		t.Run(cmp.Or(kill, "no kill"), func(t *testing.T) {
			js, stream := natsTestStream(t, url, "ONCE")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			publish := func(from, to int) []string {
				t.Helper()
				var ids []string
				for i := from; i < to; i++ {
					ids = append(ids, fmt.Sprintf("c%06d", i))
					if _, err := js.Publish(ctx, stream+".clicks", fmt.Appendf(nil, `{"aid": %q}`, ids[len(ids)-1])); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := js.Publish(ctx, stream+".other", []byte(`{"aid": "not this one"}`)); err != nil {
					t.Fatal(err)
				}
				return ids
			}
			onceBatches(t, "{name: clicks, kind: nats, url: '"+url+"', stream: "+stream+", subjects: ['"+stream+".clicks'], namespace: clicks, sink: lake}",
				"clicks", []int{1500, 700}, publish, kill)
		})
	}
}

func TestOnceKafka(t *testing.T) {
	skipShortOrWindows(t, "builds and runs the daemon on a Kafka topic")
	t.Parallel()
	for _, kill := range onceKills {
		t.Run(cmp.Or(kill, "no kill"), func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "shop.orders"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			produce := func(from, to int) []string {
				t.Helper()
				var ids []string
				var recs []*kgo.Record
				for i := from; i < to; i++ {
					ids = append(ids, fmt.Sprintf("o%06d", i))
					recs = append(recs, &kgo.Record{Topic: "shop.orders", Value: fmt.Appendf(nil, `{"aid": %q}`, ids[len(ids)-1])})
				}
				produceSync(t, c, recs)
				return ids
			}
			onceBatches(t, "{name: orders, kind: kafka, brokers: ["+strings.Join(c.ListenAddrs(), ", ")+"], topics: [shop.orders], sink: lake}",
				"shop_orders", []int{2000, 500}, produce, kill)
		})
	}
}

// onceBatches adds each batch to the source, then runs once and requires
// the lake to hold every row added so far exactly once. With kill, the
// first batch's first run is killed -9 at that log line, and a second
// run completes it.
func onceBatches(t *testing.T, source, ns string, batches []int, add func(from, to int) []string, kill string) {
	t.Helper()
	bin := buildDaemon(t)
	dataDir, lake := t.TempDir(), t.TempDir()
	pipeline := filepath.Join(t.TempDir(), "skipprd.yaml")
	writeFile(t, pipeline, "sinks:\n  lake: {kind: parquet-dir, path: "+lake+"}\nsources:\n  - "+source+"\n")
	env := []string{envPipelineFile + "=" + pipeline}
	var want []string
	for i, n := range batches {
		want = append(want, add(len(want), len(want)+n)...)
		ingested := n
		if i == 0 && kill != "" {
			if p := startOnce(t, bin, dataDir, env...); !p.killAt(t, kill) {
				t.Fatalf("the first run ended before %q: nothing was killed", kill)
			}
			ingested = -1 // what the killed run acked is not ingested again
		}
		p := runOnce(t, bin, dataDir, 0, env...)
		checkOnceDone(t, p, ingested)
		if got, w := lakeIDs(t, lake)[ns], slices.Sorted(slices.Values(want)); !slices.Equal(got, w) {
			t.Fatalf("after run %d the lake holds %d rows of %s, the broker %d: %s", i+1, len(got), ns, len(w), firstDiff(got, w))
		}
	}
}

func TestOnceSourceFails(t *testing.T) {
	bin, dataDir, f, env := onceOnDisk(t, 3)
	writeFile(t, filepath.Join(f.conf, "incoming", "f999.jsonl"), "not json\n")
	p := runOnce(t, bin, dataDir, 1, env...)
	failed := findLine(p.stderrLines(), `msg="source failed"`)
	if !strings.Contains(failed, "source=drops") || !strings.Contains(failed, "f999.jsonl") {
		t.Fatalf("the run should say the source drops failed on f999.jsonl:\n%s", strings.Join(p.stderrLines(), "\n"))
	}
	if findLine(p.stderrLines(), "once: done") != "" || findLine(p.stderrLines(), "the run did not finish") == "" {
		t.Fatalf("a run whose source failed must not say it is done:\n%s", strings.Join(p.stderrLines(), "\n"))
	}
	f.check(t, "the failed run") // the three good files, acked before the bad one
}
