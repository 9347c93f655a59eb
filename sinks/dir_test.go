package sinks

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/storage"
)

// countingExec counts the work it is given (one per encode).
type countingExec struct {
	engine.Executor
	n int
}

func (c *countingExec) Go(work, done func()) {
	c.n++
	c.Executor.Go(work, done)
}

func newOSDiskSink(t *testing.T, root string) (*storage.Loop, *ParquetDir, *countingExec, string) {
	t.Helper()
	dir := t.TempDir()
	l := startLoop(t)
	disk, err := storage.NewOSDisk(l, dir, storage.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exec := &countingExec{Executor: l.Ports(nil, disk).Exec}
	return l, NewParquetDir(disk, exec, storage.NewRand(), root), exec, dir
}

func TestParquetDirOverOSDisk(t *testing.T) {
	l, sink, exec, dir := newOSDiskSink(t, "lake")
	f := newFixture(t, plainSpec)
	if err := applyOnLoop(t, l, sink, f.job); err != nil {
		t.Fatal(err)
	}
	rel := "lake/events/p_year=2026/p_month=08/p_day=01/" + f.job.ID + ".parquet"
	if sink.Path(f.job) != rel || rel != path.Join("lake", ObjectKey("", f.job)) {
		t.Fatalf("path %s, ObjectKey %s, want %s", sink.Path(f.job), ObjectKey("", f.job), rel)
	}
	name := filepath.Join(dir, filepath.FromSlash(rel))
	body := mustRead(t, name)
	want, _ := EncodeParquet(f.job)
	if !bytes.Equal(body, want) {
		t.Fatal("the file is not the job's Parquet file")
	}
	checkArrow(t, body, f.job, nil)
	checkParquetGo(t, body, f.rows, false)
	wantOnlyFile(t, filepath.Dir(name), f.job.ID+".parquet")

	// The replay finds the file, and its footer records the job's
	// content: no encode (the one Executor call is the footer's check),
	// no write, success.
	before, _ := os.Stat(name)
	if err := applyOnLoop(t, l, sink, f.job); err != nil {
		t.Fatalf("replay: %v", err)
	}
	after, _ := os.Stat(name)
	if exec.n != 2 || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) || sink.Stats().Replays != 1 {
		t.Fatalf("%d Executor calls in all (want the encode and the footer's check), stats %+v, or the file was replaced",
			exec.n, sink.Stats())
	}
	wantOnlyFile(t, filepath.Dir(name), f.job.ID+".parquet")
}

// A crash left a temp file (junk, or a torn copy): the next attempt
// replaces it and leaves only the final file.
func TestParquetDirReplacesALeftoverTempFile(t *testing.T) {
	l, sink, _, dir := newOSDiskSink(t, "")
	f := newFixture(t, cdcSpec)
	folder := filepath.Join(dir, "orders", "p_year=2026", "p_month=08", "p_day=01")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	want, _ := EncodeParquet(f.job)
	temp := filepath.Join(folder, tempName(f.job, "0123456789abcdef")) // a crashed writer's
	if err := os.WriteFile(temp, want[:len(want)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := applyOnLoop(t, l, sink, f.job); err != nil {
		t.Fatal(err)
	}
	body := mustRead(t, filepath.Join(folder, f.job.ID+".parquet"))
	if !bytes.Equal(body, want) {
		t.Fatal("the file is not the job's Parquet file")
	}
	wantOnlyFile(t, folder, f.job.ID+".parquet")
	checkArrow(t, body, f.job, cdcRowsOf(f))
	checkParquetGo(t, body, f.rows, true)
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func wantOnlyFile(t *testing.T, folder, name string) {
	t.Helper()
	entries, err := os.ReadDir(folder)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{name}) {
		t.Fatalf("folder holds %q, want only %s", names, name)
	}
}

// Two Applies of one job at once share one attempt: one encode, one file,
// both answered.
func TestParquetDirJoinsAnApplyInFlight(t *testing.T) {
	w := newSimWorld(t, 21, sim.StoreConfig{}, sim.DiskConfig{})
	f := newFixture(t, plainSpec)
	exec := &countingExec{Executor: w.inc.Executor()}
	sink := NewParquetDir(w.disk.Client(w.inc), exec, w.root.Split("sink"), "lake")
	var answers []error
	applyChecked(t, sink, f.job, func(err error) { answers = append(answers, err) })
	applyChecked(t, sink, f.job, func(err error) { answers = append(answers, err) })
	w.drain()
	if len(answers) != 2 || answers[0] != nil || answers[1] != nil || exec.n != 1 {
		t.Fatalf("answers %v after %d encodes, want two nils after one", answers, exec.n)
	}
	wantSimFile(t, w, sink, f.job)
}

// A disk error is reported naming the job and leaves no temp file behind;
// the retry applies the job.
func TestParquetDirDiskErrorThenRetry(t *testing.T) {
	// (The sim disk's Close never fails, and its Open reports a missing
	// file before an I/O error, so the open that fails is the temp file's.)
	for _, tc := range []struct {
		op     sim.DiskOp
		suffix string // of the path the failing operation names
	}{
		{sim.DiskMkdirAll, ""}, {sim.DiskSyncDir, ""}, {sim.DiskOpen, ".tmp"},
		{sim.DiskWrite, ""}, {sim.DiskSync, ""}, {sim.DiskRename, ""}, {sim.DiskSyncDir, "p_day=01"},
	} {
		t.Run(tc.op.String()+tc.suffix, func(t *testing.T) {
			fault := sim.DiskFault(sim.DiskIOError, tc.op).Suffix(tc.suffix).Nth(1)
			w := newSimWorld(t, 22, sim.StoreConfig{}, sim.DiskConfig{Faults: sim.DiskRules(fault)})
			f := newFixture(t, cdcSpec)
			sink := NewParquetDir(w.disk.Client(w.inc), w.inc.Executor(), w.root.Split("sink"), "lake")
			err := w.apply(sink, f.job)
			if err == nil || !strings.Contains(err.Error(), f.job.ID) || !strings.Contains(err.Error(), f.job.Namespace) {
				t.Fatalf("got %v, want an error naming job %s and namespace %s", err, f.job.ID, f.job.Namespace)
			}
			if fault.Fired() != 1 {
				t.Fatalf("the %s fault fired %d times, want 1", tc.op, fault.Fired())
			}
			if w.disk.Exists(path.Join(path.Dir(sink.Path(f.job)), tempName(f.job, sink.token))) {
				t.Fatal("the failed attempt left its temp file")
			}
			if err := w.apply(sink, f.job); err != nil {
				t.Fatalf("retry: %v", err)
			}
			wantSimFile(t, w, sink, f.job)
		})
	}
}

// wantSimFile checks that the job's folder on the sim disk holds exactly
// its complete file, durable.
func wantSimFile(t testing.TB, w *simWorld, sink *ParquetDir, job *engine.Job) {
	t.Helper()
	want, err := EncodeParquet(job)
	if err != nil {
		t.Fatal(err)
	}
	wantSimBytes(t, w, sink.Path(job), want)
}

func wantSimBytes(t testing.TB, w *simWorld, final string, want []byte) {
	t.Helper()
	var inFolder []string
	for _, p := range w.disk.Paths() {
		if path.Dir(p) == path.Dir(final) {
			inFolder = append(inFolder, p)
		}
	}
	written, durable := w.disk.File(final)
	if !slices.Equal(inFolder, []string{final}) || !bytes.Equal(written, want) || !bytes.Equal(durable, want) {
		t.Fatalf("folder holds %q (final: %d bytes, %d durable), want only %s with the job's %d bytes, durable",
			inFolder, len(written), len(durable), final, len(want))
	}
	for p := final; p != "."; p = path.Dir(p) {
		if !w.disk.EntryDurable(p) {
			t.Fatalf("%s: entry not durable after success", p)
		}
	}
}

// The crash property: over many seeds, crash (kill and power loss) at a
// random point of an Apply, possibly again during the retry, with disk
// errors on the way; a final retry on a new incarnation always ends with
// exactly one complete file, and a final file seen after any crash is
// never partial.
func TestParquetDirCrashAnywhere(t *testing.T) {
	f := newFixture(t, smallSpec)
	want, err := EncodeParquet(f.job)
	if err != nil {
		t.Fatal(err)
	}
	final := NewParquetDir(noDisk{}, noExec{}, fixedRand(0), "lake").Path(f.job)
	var crashes, tornTemps, finalsAfterCrash int
	for seed := uint64(1); seed <= seedsMax(400); seed++ {
		faulty := true
		w := newSimWorld(t, seed, sim.StoreConfig{}, sim.DiskConfig{Faults: flakyDisk(&faulty)})
		r := w.root.Split("test")
		done := false
		var last error
		for attempt := 0; attempt < 30 && !done; attempt++ {
			if attempt == 10 {
				faulty = false // the quiet phase: the run must converge
			}
			sink := NewParquetDir(w.disk.Client(w.inc), w.inc.Executor(), w.root.Split(fmt.Sprintf("sink/%d", attempt)), "lake")
			answered := false
			applyChecked(t, sink, f.job, func(err error) { last, answered = err, true })
			for steps := r.Intn(40); !answered && (steps > 0 || !faulty); steps-- {
				if !w.sched.Step() {
					break
				}
			}
			switch {
			case answered && last == nil:
				done = true
			case answered && r.Chance(0.5):
				// retry on the same incarnation
			default:
				w.crash()
				crashes++
				if written, _ := w.disk.File(final); written != nil {
					finalsAfterCrash++
					if !bytes.Equal(written, want) {
						t.Fatalf("seed %d: after a crash the final file holds %d bytes, not the job's %d\n%s",
							seed, len(written), len(want), reproduceCrashAnywhere)
					}
				}
				for _, p := range w.disk.Paths() {
					if b, _ := w.disk.File(p); path.Dir(p) == path.Dir(final) && isTempName(path.Base(p)) && !bytes.Equal(b, want) {
						tornTemps++
					}
				}
			}
		}
		if !done {
			t.Fatalf("seed %d: never applied; last error %v\n%s", seed, last, reproduceCrashAnywhere)
		}
		wantSimBytes(t, w, final, want)
		// Success means durable: power loss right after keeps the file.
		w.crash()
		wantSimBytes(t, w, final, want)
	}
	if crashes == 0 || tornTemps == 0 || finalsAfterCrash == 0 {
		t.Fatalf("crashes %d, torn temp files %d, final files after a crash %d: the seeds miss a path",
			crashes, tornTemps, finalsAfterCrash)
	}
	t.Logf("crashes %d, torn temp files %d, final files after a crash %d", crashes, tornTemps, finalsAfterCrash)
}

const reproduceCrashAnywhere = "reproduce: go test ./sinks -run 'TestParquetDirCrashAnywhere' (its seeds are fixed)"

// noDisk and noExec stand in where a sink is built only for Path.
type noDisk struct{ engine.Disk }
type noExec struct{ engine.Executor }

// Two writers apply one job to one folder at once — a zombie that has not
// noticed it was superseded, and its successor — with disk errors on the
// way. Neither may ever expose a partial final file (one writer must not
// rename the other's temp file, nor remove it mid-write), and once both
// have succeeded a fresh writer leaves the folder holding exactly the
// complete file.
func TestParquetDirTwoWritersOneFolder(t *testing.T) {
	f := newFixture(t, smallSpec)
	want, err := EncodeParquet(f.job)
	if err != nil {
		t.Fatal(err)
	}
	final := NewParquetDir(noDisk{}, noExec{}, fixedRand(0), "lake").Path(f.job)
	var raced int
	for seed := uint64(1); seed <= seedsMax(200); seed++ {
		faulty := true
		w := newSimWorld(t, seed, sim.StoreConfig{}, sim.DiskConfig{Faults: flakyDisk(&faulty)})
		zombie := w.sched.NewIncarnation()
		writers := []struct {
			inc  *sim.Incarnation
			sink *ParquetDir
		}{
			{zombie, NewParquetDir(w.disk.Client(zombie), zombie.Executor(), w.root.Split("zombie"), "lake")},
			{w.inc, NewParquetDir(w.disk.Client(w.inc), w.inc.Executor(), w.root.Split("successor"), "lake")},
		}
		done := make([]bool, len(writers))
		busy := make([]bool, len(writers))
		sawTemps := 0
		for step := 0; !done[0] || !done[1]; step++ {
			if step == 4000 {
				faulty = false
			}
			if step > 20000 {
				t.Fatalf("seed %d: the writers never both succeeded", seed)
			}
			for i, wr := range writers {
				if !done[i] && !busy[i] {
					busy[i] = true
					applyChecked(t, wr.sink, f.job, func(err error) { busy[i], done[i] = false, err == nil })
				}
			}
			if !w.sched.Step() {
				t.Fatalf("seed %d: the world went idle with the writers busy", seed)
			}
			if written, _ := w.disk.File(final); w.disk.Exists(final) && !bytes.Equal(written, want) {
				t.Fatalf("seed %d step %d: the final file holds %d bytes, not the job's %d", seed, step, len(written), len(want))
			}
			if n := tempsIn(w, path.Dir(final)); n > 1 {
				sawTemps++
			}
		}
		if sawTemps > 0 {
			raced++
		}
		faulty = false
		fresh := NewParquetDir(w.disk.Client(w.inc), w.inc.Executor(), w.root.Split("fresh"), "lake")
		if err := w.apply(fresh, f.job); err != nil {
			t.Fatalf("seed %d: a fresh writer: %v", seed, err)
		}
		wantSimBytes(t, w, final, want)
	}
	if raced == 0 {
		t.Fatal("no seed had both writers' temp files in the folder at once: the test misses the race")
	}
	t.Logf("%d seeds raced", raced)
}

// tempsIn counts the temp files in a folder of the sim disk.
func tempsIn(w *simWorld, dir string) (n int) {
	for _, p := range w.disk.Paths() {
		if path.Dir(p) == dir && strings.HasPrefix(path.Base(p), tempPrefix) {
			n++
		}
	}
	return n
}

// fixedRand is an engine.Rand that always answers itself.
type fixedRand uint64

func (r fixedRand) Uint64() uint64 { return uint64(r) }

// flakyDisk fails 3% of disk operations with an I/O error while *faulty.
func flakyDisk(faulty *bool) sim.DiskFaults {
	return sim.DiskRules(sim.DiskFault(sim.DiskIOError).While(faulty).Chance(0.03, nil))
}
