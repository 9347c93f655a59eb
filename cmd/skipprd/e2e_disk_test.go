package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/skipprd/skipprd/sources/generator"
	"github.com/skipprd/skipprd/storage"
)

// End to end on the local-disk WAL (the default mode): the real binary,
// real files, SIGKILL at random moments.

// envKillSeed, if set, fixes the kill test's seed (it is logged).
const envKillSeed = "SKIPPRD_E2E_KILL_SEED"

// TestDaemonDiskWALKills runs the daemon with WAL_STORAGE=disk and the
// local segment store on one DATA_DIR again and again, SIGKILLing it at a
// random (seeded) moment of each run: at least ten times while the
// generator ingests, a few more during start-up. Every run must resume
// each generator partition no lower than the run before. (Not as far as
// the killed run had acked: units recovery replays from the log count as
// committed only once their generation commits, so the generator may
// resend them; they are answered at that commit and stored once, which
// the lake check below sees.) While the first
// run holds DATA_DIR/wal.lock a second daemon must refuse to start. The
// last run stops on SIGINT and drains; then the lake must hold exactly the
// records the WAL committed — every one the generator had been acked, and
// maybe a unit committed while it stopped, whose answer it never took —
// each once: every record below the WAL's final offsets of every
// partition (regenerated from the generator, which is a pure function of
// namespace, partition and offset), and nothing else.
func TestDaemonDiskWALKills(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and runs it a dozen times (about 30 s)")
	t.Parallel()
	rng := rand.New(rand.NewPCG(killSeed(t), 0x5eed))
	bin := buildDaemon(t)
	dataDir := t.TempDir()
	// Two log partitions and 1 MiB log segments, so that a run rolls
	// segments and recovery reads several; the sync mode is drawn per run
	// (it may change across restarts).
	baseEnv := []string{envWALStorage + "=disk", envWALPartitions + "=2", envWALSegmentBytes + "=1048576"}
	envOfRun := func() ([]string, string) {
		mode := "SYNC"
		if rng.IntN(3) == 0 {
			mode = "BATCH_SYNC"
		}
		return append(slices.Clone(baseEnv), envWALSyncMode+"="+mode), mode
	}

	const (
		ingestKills  = 10
		startupKills = 3
	)
	var (
		prev map[string]uint64 // the last run that resumed: where it resumed
		runs []*proc
	)
	// checkResume holds a run's resume offsets against the previous run's.
	checkResume := func(run int, resumed map[string]uint64) {
		t.Helper()
		if prev == nil {
			return
		}
		for key, v := range resumed {
			if v < prev[key] {
				t.Fatalf("run %d resumed %s at %d, below the %d the run before resumed at", run, key, v, prev[key])
			}
		}
	}
	kills, early := 0, 0
	for run := 0; kills < ingestKills; run++ {
		env, mode := envOfRun()
		p := startDaemon(t, bin, dataDir, env...)
		runs = append(runs, p)
		if early < startupKills && run > 0 && rng.IntN(3) == 0 {
			// During start-up or recovery: within the first 60 ms.
			early++
			d := time.Duration(rng.Int64N(int64(60 * time.Millisecond)))
			time.Sleep(d)
			p.kill(t)
			t.Logf("run %d (%s): killed %v after start", run, mode, d)
		} else {
			p.waitStderr(t, "the generator resuming", func(lines []string) bool {
				return findLine(lines, "generator: resuming from offsets") != ""
			})
			if run == 0 {
				checkSecondDaemonRefused(t, bin, dataDir, env)
			}
			d := 20*time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Second)))
			time.Sleep(d)
			p.kill(t)
			kills++
			t.Logf("run %d (%s): killed %v into ingest; last progress: %s", run, mode, d, lastProgress(p.stdoutLines()))
		}
		// A run killed before its generator started: the next run is
		// checked against the last one that did start.
		if findLine(p.stderrLines(), "generator: resuming from offsets") == "" {
			continue
		}
		resumed := p.offsetsLogged(t, "generator: resuming from offsets")
		checkResume(run, resumed)
		prev = resumed
	}

	// The last run: resume, finish the orders snapshot, ingest a little,
	// then stop on SIGINT and drain.
	env, mode := envOfRun()
	final := startDaemon(t, bin, dataDir, append(env, stopGraceLong)...)
	runs = append(runs, final)
	final.waitStderr(t, "the orders snapshot complete", func(lines []string) bool {
		return findLine(lines, "generator: snapshot complete") != ""
	})
	checkResume(len(runs)-1, final.offsetsLogged(t, "generator: resuming from offsets"))
	final.waitStdout(t, "a progress line with new acks", progressLines("acked", 1))
	final.stop(t)
	stopped := final.offsetsLogged(t, "generator stopped at")
	// The lake holds what the WAL committed: what the generator was acked,
	// and maybe a unit committed while it was stopping, whose answer it
	// never took (a replayed unit's resend waits for its generation's
	// commit) — never less.
	committed := final.offsetsLogged(t, "the WAL committed up to")
	for k, v := range stopped {
		if committed[k] < v {
			t.Fatalf("partition %s: the generator was acked up to %d, the WAL committed up to %d", k, v, committed[k])
		}
	}
	last, _ := parseProgress(lastProgress(final.stdoutLines()))
	if last["ingested"] != last["acked"] || last["live_segments"] != 0 || last["wal_syncs"] == 0 || last["wal_sync_failures"] != 0 {
		t.Fatalf("graceful stop (%s) did not drain: %s", mode, lastProgress(final.stdoutLines()))
	}
	for i, p := range runs {
		if l := findLine(p.stderrLines(), "engine alert"); l != "" {
			t.Fatalf("run %d alerted: %s", i, l)
		}
	}

	checkDiskLayout(t, dataDir, 2, true)
	got := lakeIDs(t, filepath.Join(dataDir, "lake"))
	want := generatedIDs(t, committed)
	for ns, ids := range want {
		if g := got[ns]; !slices.Equal(g, ids) {
			t.Fatalf("lake %s: %d records, want the %d acked ones; first difference: %s", ns, len(g), len(ids), firstDiff(g, ids))
		}
	}
	for ns := range got {
		if _, ok := want[ns]; !ok {
			t.Fatalf("lake holds namespace %s, which the generator never acked", ns)
		}
	}
	t.Logf("%d runs (%d killed in ingest, %d in start-up), then a drain; lake rows: events %d, orders %d, sessions %d, pageviews %d",
		len(runs), kills, early, len(got["events"]), len(got["orders"]), len(got["sessions"]), len(got["pageviews"]))
}

// TestDaemonDiskWALWithS3Segments runs WAL_STORAGE=disk with its segments
// in an S3 bucket (an embedded gofakes3 store this test serves, reached
// through the standard AWS variables): the log goes to DATA_DIR/wal, the
// segments to the bucket, nothing to DATA_DIR/segments, and SIGINT stops
// it with every acked row applied.
func TestDaemonDiskWALWithS3Segments(t *testing.T) {
	skipShortOrWindows(t, "waits out the S3 recovery fence (35 s)")
	t.Parallel()
	const bucket = "skipprd-segments"
	emb, err := storage.StartEmbeddedS3(filepath.Join(t.TempDir(), "s3.bolt"), bucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emb.Close() })
	bin := buildDaemon(t)
	dataDir := t.TempDir()
	p := startDaemon(t, bin, dataDir, append(append(s3Env(t, emb.Endpoint()), envWALStorage+"=disk", envWALBucket+"="+bucket, stopGraceLong), quickLake...)...)
	p.waitStderr(t, "the orders snapshot complete", func(lines []string) bool {
		return findLine(lines, "generator: snapshot complete") != ""
	})
	mode := findLine(p.stderrLines(), "WAL: local disk")
	if !strings.Contains(mode, "segments=s3://"+bucket) || !strings.Contains(mode, "log="+filepath.Join(dataDir, "wal")) {
		t.Fatalf("start-up should say the log is in DATA_DIR/wal and the segments in the bucket: %q", mode)
	}
	p.waitStdout(t, "two progress lines with applied rows", progressLines("applied", 2))
	p.stop(t)
	last, _ := parseProgress(lastProgress(p.stdoutLines()))
	if last["ingested"] != last["acked"] || last["applied"] != last["acked"] || last["live_segments"] != 0 || last["wal_syncs"] == 0 {
		t.Fatalf("graceful stop did not apply everything: %s", lastProgress(p.stdoutLines()))
	}
	checkDiskLayout(t, dataDir, 1, false)
	checkLake(t, filepath.Join(dataDir, "lake"))
	// The segments' store was the bucket: the writer object is there.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := emb.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("wal/default/")})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	if !slices.Contains(keys, "wal/default/_writer") {
		t.Fatalf("bucket keys %q: no writer object", keys)
	}
	t.Logf("startup %s; bucket keys after the drain: %q", p.startup(), keys)
}

// checkSecondDaemonRefused starts a second daemon on dataDir while one
// runs there: it must exit 1 at once, naming the lock file and its holder.
func checkSecondDaemonRefused(t *testing.T, bin, dataDir string, env []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(append(cleanEnv(), envDataDir+"="+dataDir), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second daemon on the same DATA_DIR: %v, want exit 1\n%s", err, out)
	}
	lock := filepath.Join(dataDir, walLockFile)
	if !strings.Contains(string(out), lock) || !strings.Contains(string(out), "another skipprd holds it") {
		t.Fatalf("second daemon's message should name %s and say another skipprd holds it:\n%s", lock, out)
	}
	if strings.Contains(string(out), "progress ") || strings.Contains(string(out), "msg=ready") {
		t.Fatalf("second daemon ran:\n%s", out)
	}
}

var walSegmentName = regexp.MustCompile(`^segment-\d{12}\.wal$`)

// checkDiskLayout requires the log under DATA_DIR/wal/partition-{id}
// (partitions of them, each holding only segment-{12 digits}.wal files,
// at least one), the lock file, and the local segment store under
// DATA_DIR/segments exactly when local.
func checkDiskLayout(t *testing.T, dataDir string, partitions int, local bool) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dataDir, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		dirs = append(dirs, e.Name())
		files, err := os.ReadDir(filepath.Join(dataDir, "wal", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("wal/%s is empty", e.Name())
		}
		for _, f := range files {
			if !walSegmentName.MatchString(f.Name()) {
				t.Fatalf("wal/%s/%s is not a log segment", e.Name(), f.Name())
			}
		}
	}
	var want []string
	for i := range partitions {
		want = append(want, fmt.Sprintf("partition-%d", i))
	}
	if !slices.Equal(dirs, want) {
		t.Fatalf("DATA_DIR/wal holds %q, want %q", dirs, want)
	}
	if _, err := os.Stat(filepath.Join(dataDir, walLockFile)); err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat(filepath.Join(dataDir, segmentsDir, "objects"))
	if local && err != nil {
		t.Fatalf("local segment store: %v", err)
	}
	if !local && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("segments went to a bucket, yet DATA_DIR/segments: %v", err)
	}
}

// lakeIDs reads every Parquet file of the lake and returns each
// namespace's ids (first column), sorted; duplicates stay.
func lakeIDs(t *testing.T, lake string) map[string][]string {
	t.Helper()
	if tables := icebergLake(t, lake); tables != nil {
		return icebergIDs(t, tables) // an Iceberg warehouse (the default lake)
	}
	paths, err := filepath.Glob(filepath.Join(lake, "*", "p_year=*", "p_month=*", "p_day=*", "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, path := range paths {
		rel, _ := filepath.Rel(lake, path)
		ns := strings.Split(filepath.ToSlash(rel), "/")[0]
		out[ns] = append(out[ns], readIDs(t, path)...)
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

var offsetKey = regexp.MustCompile(`^generator/([a-z]+)/(\d+)$`)

// generatedIDs regenerates the ids of records [0, offsets[key]) of every
// generator partition, per namespace, sorted.
func generatedIDs(t *testing.T, offsets map[string]uint64) map[string][]string {
	t.Helper()
	gen := generator.New(generator.Config{SinkRef: lakeSinkRef})
	out := map[string][]string{}
	const chunk = 10_000
	for key, n := range offsets {
		m := offsetKey.FindStringSubmatch(key)
		if m == nil {
			t.Fatalf("offset key %q", key)
		}
		ns := m[1]
		part, _ := strconv.Atoi(m[2])
		for from := uint64(0); from < n; from += chunk {
			rec, err := gen.Records(ns, part, from, int(min(chunk, n-from)))
			if err != nil {
				t.Fatal(err)
			}
			out[ns] = appendIDs(t, out[ns], rec.Column(0), key)
			rec.Release()
		}
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

// firstDiff describes where two sorted id lists first differ.
func firstDiff(got, want []string) string {
	acked := map[string]bool{}
	for _, id := range want {
		acked[id] = true
	}
	seen := map[string]int{}
	twice, extra := 0, 0
	for _, id := range got {
		if seen[id]++; seen[id] == 2 {
			twice++
		}
		if !acked[id] {
			extra++
		}
	}
	missing := 0
	for _, id := range want {
		if seen[id] == 0 {
			missing++
		}
	}
	out := fmt.Sprintf("%d records twice or more, %d never acked, %d acked missing", twice, extra, missing)
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return out + fmt.Sprintf("; at %d the lake has %s, the generator acked %s", i, got[i], want[i])
		}
	}
	return out
}

// lastProgress is the last progress line of stdout, or "".
func lastProgress(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "progress ") {
			return lines[i]
		}
	}
	return ""
}
