package sim

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"pgregory.net/rapid"
)

// diskWorld is a scheduler, a disk and the current incarnation.
type diskWorld struct {
	t     tb
	sched *Scheduler
	disk  *Disk
	inc   *Incarnation
	c     engine.Disk
	root  *Rand
}

// tb is what the worlds need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func newDiskWorld(t tb, seed uint64, cfg DiskConfig) *diskWorld {
	root := NewRand(seed)
	s := NewScheduler(root.Split("sched"), NewTrace(), SchedulerConfig{})
	d := NewDisk(s, root.Split("disk"), cfg)
	w := &diskWorld{t: t, sched: s, disk: d, root: root}
	w.restart()
	return w
}

func (w *diskWorld) restart() {
	w.inc = w.sched.NewIncarnation()
	w.c = w.disk.Client(w.inc)
}

// crash kills the incarnation, crashes the disk and starts a new one.
func (w *diskWorld) crash() {
	w.inc.Kill()
	w.disk.Crash(w.root.Split("crash/" + strconv.FormatUint(w.inc.ID(), 10)))
	w.restart()
}

func (w *diskWorld) await(issue func(finish func())) {
	w.t.Helper()
	finished := false
	issue(func() { finished = true })
	for !finished {
		if !w.sched.Step() {
			w.t.Fatal("world went idle before the callback ran")
		}
	}
}

func (w *diskWorld) do(what string, op func(done func(error))) error {
	w.t.Helper()
	var err error
	w.await(func(finish func()) { op(func(e error) { err = e; finish() }) })
	return err
}

func (w *diskWorld) must(what string, op func(done func(error))) {
	w.t.Helper()
	if err := w.do(what, op); err != nil {
		w.t.Fatalf("%s: %v", what, err)
	}
}

func (w *diskWorld) open(p string, mode engine.OpenMode) (engine.File, error) {
	var f engine.File
	var err error
	w.await(func(finish func()) { w.c.Open(p, mode, func(ff engine.File, e error) { f, err = ff, e; finish() }) })
	return f, err
}

func (w *diskWorld) create(p string) engine.File {
	w.t.Helper()
	f, err := w.open(p, engine.OpenMode{Create: true, Write: true})
	if err != nil {
		w.t.Fatalf("create %s: %v", p, err)
	}
	return f
}

func (w *diskWorld) syncDir(dir string) {
	w.t.Helper()
	w.must("syncdir "+dir, func(done func(error)) { w.c.SyncDir(dir, done) })
}

func (w *diskWorld) write(f engine.File, p []byte, off int64) error {
	return w.do("write", func(done func(error)) { f.WriteAt(p, off, done) })
}

func (w *diskWorld) sync(f engine.File) error {
	return w.do("sync", func(done func(error)) { f.Sync(done) })
}

// contents returns the live bytes of p, or nil and false if absent.
func (w *diskWorld) contents(p string) ([]byte, bool) {
	data, _ := w.disk.File(p)
	return data, w.disk.files[p] != nil
}

// Synced bytes in a durable entry survive every crash, whatever the seed.
// Catches a crash model that loses durable data.
func TestDiskSyncedSurvivesCrash(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		w := newDiskWorld(t, seed, DiskConfig{})
		w.must("mkdir", func(done func(error)) { w.c.MkdirAll("wal/p0", done) })
		w.syncDir("")
		w.syncDir("wal")
		f := w.create("wal/p0/seg")
		w.write(f, []byte("synced-"), 0)
		w.sync(f)
		w.syncDir("wal/p0")
		w.write(f, []byte("unsynced"), 7)
		w.crash()
		got, ok := w.contents("wal/p0/seg")
		if !ok || !bytes.HasPrefix(got, []byte("synced-")) || len(got) > len("synced-unsynced") {
			t.Fatalf("seed %d: after crash %q (present %v)", seed, got, ok)
		}
	}
}

// The crash property: for any sequence of writes, truncates, syncs and
// crashes on two files, each file after a crash equals its durable image
// plus a prefix of its unsynced writes in order, the last possibly torn to
// a prefix of its bytes — never reordered, never invented — and before a
// crash every read sees every completed write.
func TestDiskCrashProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := newDiskWorld(rt, rapid.Uint64().Draw(rt, "seed"), DiskConfig{})
		names := []string{"a", "b"}
		model := map[string]*fileModel{}
		files := map[string]engine.File{}
		for _, n := range names {
			files[n] = w.create(n)
			model[n] = &fileModel{}
		}
		w.syncDir("")
		for range rapid.IntRange(1, 40).Draw(rt, "ops") {
			n := rapid.SampledFrom(names).Draw(rt, "file")
			m, f := model[n], files[n]
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1, 2, 3:
				off := int64(rapid.IntRange(0, len(m.data)+4).Draw(rt, "off"))
				p := rapid.SliceOfN(rapid.Byte(), 1, 12).Draw(rt, "bytes")
				if err := w.write(f, p, off); err != nil {
					rt.Fatal(err)
				}
				m.do(fileWrite{off: off, buf: slices.Clone(p)})
			case 4:
				size := int64(rapid.IntRange(0, len(m.data)+4).Draw(rt, "size"))
				if err := w.do("truncate", func(done func(error)) { f.Truncate(size, done) }); err != nil {
					rt.Fatal(err)
				}
				m.do(fileWrite{off: size, truncate: true})
			case 5, 6, 7:
				if err := w.sync(f); err != nil {
					rt.Fatal(err)
				}
				m.durable, m.pending = slices.Clone(m.data), nil
			case 8:
				w.crash()
				for _, name := range names {
					got, ok := w.contents(name)
					if !ok {
						rt.Fatalf("durable entry %s lost", name)
					}
					if !model[name].crashResultValid(got) {
						rt.Fatalf("%s after crash = %v; durable %v, pending %v", name, got, model[name].durable, model[name].pending)
					}
					model[name].reset(got)
					files[name], _ = w.open(name, engine.OpenMode{Write: true})
				}
			case 9:
				// Each write ends at most 16 bytes past the file's end:
				// 40 ops cannot outgrow this buffer (a 64-byte one was
				// outgrown by a file of 65 bytes, failing the test).
				var buf [1024]byte
				var k int
				w.await(func(finish func()) { f.ReadAt(buf[:], 0, func(nn int, _ error) { k = nn; finish() }) })
				if !bytes.Equal(buf[:k], m.data) {
					rt.Fatalf("read %v, want %v", buf[:k], m.data)
				}
			}
		}
	})
}

// fileModel is the trivially simple model of one file.
type fileModel struct {
	data, durable []byte
	pending       []fileWrite
}

func (m *fileModel) do(w fileWrite) {
	m.data = w.apply(slices.Clone(m.data))
	m.pending = append(m.pending, w)
}

func (m *fileModel) reset(got []byte) {
	m.data, m.durable, m.pending = slices.Clone(got), slices.Clone(got), nil
}

// crashResultValid reports whether got is durable + a prefix of pending,
// the last one possibly torn.
func (m *fileModel) crashResultValid(got []byte) bool {
	img := slices.Clone(m.durable)
	for k := 0; ; k++ {
		if bytes.Equal(img, got) {
			return true
		}
		if k == len(m.pending) {
			return false
		}
		w := m.pending[k]
		for cut := 1; !w.truncate && cut < len(w.buf); cut++ {
			torn := fileWrite{off: w.off, buf: w.buf[:cut]}
			if bytes.Equal(torn.apply(slices.Clone(img)), got) {
				return true
			}
		}
		img = w.apply(img)
	}
}

// existsAfterCrash runs scenario on fresh worlds over many seeds and
// counts how often path exists after a crash.
func existsAfterCrash(t *testing.T, path string, scenario func(w *diskWorld)) (present, absent int) {
	for seed := uint64(1); seed <= 60; seed++ {
		w := newDiskWorld(t, seed, DiskConfig{})
		scenario(w)
		w.crash()
		if _, ok := w.contents(path); ok {
			present++
		} else {
			absent++
		}
	}
	return present, absent
}

// Directory entries are durable only after SyncDir of their directory:
// without it a created file may vanish (and over many seeds sometimes
// does); with it, it never does. Catches Sync implying the entry is
// durable, or SyncDir doing nothing.
func TestDiskSyncDirCreate(t *testing.T) {
	setup := func(syncDir bool) func(w *diskWorld) {
		return func(w *diskWorld) {
			w.must("mkdir", func(done func(error)) { w.c.MkdirAll("d", done) })
			w.syncDir("")
			f := w.create("d/x")
			w.write(f, []byte("data"), 0)
			w.sync(f)
			if syncDir {
				w.syncDir("d")
			}
		}
	}
	p, a := existsAfterCrash(t, "d/x", setup(false))
	if p == 0 || a == 0 {
		t.Fatalf("unsynced create: present %d, absent %d; want both", p, a)
	}
	if _, a := existsAfterCrash(t, "d/x", setup(true)); a != 0 {
		t.Fatalf("synced create lost in %d crashes", a)
	}
}

// A rename is atomic: after a crash exactly one of the two names exists
// (both outcomes occur without SyncDir); after SyncDir only the new one.
// Also: a directory made by MkdirAll is lost with its files unless its
// parent is synced.
func TestDiskSyncDirRenameRemoveMkdir(t *testing.T) {
	rename := func(syncDir bool) func(w *diskWorld) {
		return func(w *diskWorld) {
			f := w.create("tmp")
			w.write(f, []byte("bitmap"), 0)
			w.sync(f)
			w.syncDir("")
			w.must("rename", func(done func(error)) { w.c.Rename("tmp", "final", done) })
			if syncDir {
				w.syncDir("")
			}
			tmp, final := w.disk.files["tmp"] != nil, w.disk.files["final"] != nil
			if !final || tmp {
				w.t.Fatalf("live rename: tmp %v final %v", tmp, final)
			}
		}
	}
	for _, syncDir := range []bool{false, true} {
		both, outcomes := 0, map[bool]int{}
		for seed := uint64(1); seed <= 60; seed++ {
			w := newDiskWorld(t, seed, DiskConfig{})
			rename(syncDir)(w)
			w.crash()
			_, tmp := w.contents("tmp")
			got, final := w.contents("final")
			if tmp == final {
				both++
			}
			if final && string(got) != "bitmap" {
				t.Fatalf("renamed file holds %q", got)
			}
			outcomes[final]++
		}
		if both != 0 || (!syncDir && len(outcomes) != 2) || (syncDir && outcomes[false] != 0) {
			t.Fatalf("syncDir=%v: non-atomic %d, outcomes %v", syncDir, both, outcomes)
		}
	}

	remove := func(w *diskWorld) {
		f := w.create("old")
		w.sync(f)
		w.syncDir("")
		w.must("remove", func(done func(error)) { w.c.Remove("old", done) })
	}
	if p, a := existsAfterCrash(t, "old", remove); p == 0 || a == 0 {
		t.Fatalf("unsynced remove: present %d absent %d; want both", p, a)
	}
	if p, _ := existsAfterCrash(t, "old", func(w *diskWorld) { remove(w); w.syncDir("") }); p != 0 {
		t.Fatalf("synced remove undone by %d crashes", p)
	}

	mkdir := func(w *diskWorld) {
		w.must("mkdir", func(done func(error)) { w.c.MkdirAll("a/b", done) })
		f := w.create("a/b/f")
		w.sync(f)
		w.syncDir("a/b")
	}
	if p, a := existsAfterCrash(t, "a/b/f", mkdir); p == 0 || a == 0 {
		t.Fatalf("file under unsynced mkdir: present %d absent %d; want both", p, a)
	}
	if _, a := existsAfterCrash(t, "a/b/f", func(w *diskWorld) { mkdir(w); w.syncDir(""); w.syncDir("a") }); a != 0 {
		t.Fatalf("file under synced dirs lost %d times", a)
	}
}

// An fsync error poisons the file: the failed sync reports ErrIO, a
// retried sync reports success but makes nothing durable, so across
// crashes the data is sometimes lost. Without the fault it never is.
// Catches a model in which retrying fsync is (wrongly) safe.
func TestDiskFsyncErrorPoisons(t *testing.T) {
	run := func(fail bool) (lost int) {
		for seed := uint64(1); seed <= 40; seed++ {
			faults := DiskRules(DiskFault(DiskIOError, DiskSync).While(&fail).Nth(1))
			w := newDiskWorld(t, seed, DiskConfig{Faults: faults})
			f := w.create("seg")
			w.syncDir("")
			w.write(f, []byte("entry-1"), 0)
			err := w.sync(f)
			if fail != errors.Is(err, ErrIO) {
				t.Fatalf("first sync: %v", err)
			}
			if err := w.sync(f); err != nil {
				t.Fatalf("retried sync: %v (the model reports success)", err)
			}
			w.crash()
			if got, _ := w.contents("seg"); string(got) != "entry-1" {
				lost++
			}
		}
		return lost
	}
	if lost := run(false); lost != 0 {
		t.Fatalf("synced data lost %d times without a fault", lost)
	}
	if lost := run(true); lost == 0 {
		t.Fatal("a retried fsync after an fsync error made the data durable in every seed")
	}
}

// Calls on one File complete in the order they were made, even with a
// wildly varying latency; calls on different Files do not (the test would
// be vacuous otherwise).
func TestDiskFileOrdering(t *testing.T) {
	var lat [NumDiskOps]Latency
	for op := range NumDiskOps {
		lat[op] = Latency{Base: time.Microsecond, Tail: time.Millisecond}
	}
	w := newDiskWorld(t, 11, DiskConfig{Latency: lat})
	f := w.create("one")
	g := w.create("two")
	var order, cross []int
	for i := range 60 {
		switch i % 4 {
		case 0:
			f.WriteAt([]byte{byte(i)}, int64(i), func(error) { order = append(order, i) })
		case 1:
			f.Sync(func(error) { order = append(order, i) })
		case 2:
			f.ReadAt(make([]byte, 4), 0, func(int, error) { order = append(order, i) })
		case 3:
			f.Size(func(int64, error) { order = append(order, i) })
		}
		h := f
		if i%2 == 1 {
			h = g
		}
		h.Append([]byte{1}, func(int64, error) { cross = append(cross, i) })
	}
	w.sched.Run(10000)
	if !slices.IsSorted(order) || len(order) != 60 {
		t.Fatalf("calls on one file completed out of order: %v", order)
	}
	if slices.IsSorted(cross) {
		t.Fatal("calls on two files always completed in order: the latency model has no variance")
	}
}

// Each disk fault does what it says and nothing more.
func TestDiskFaults(t *testing.T) {
	var next DiskOutcome
	faults := DiskFaultsFunc(func(op DiskOp, _ string, _ *Rand) (DiskOutcome, time.Duration) {
		o := next
		next = DiskOK
		return o, 0
	})
	w := newDiskWorld(t, 12, DiskConfig{Faults: faults, CapacityBytes: 64})
	f := w.create("f")
	w.syncDir("")
	w.write(f, []byte("0123456789"), 0)

	next = DiskIOError
	if err := w.write(f, []byte("XX"), 0); !errors.Is(err, ErrIO) {
		t.Fatalf("write error: %v", err)
	}
	next = DiskNoSpace
	if err := w.write(f, []byte("YY"), 10); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("no space: %v", err)
	}
	if err := w.write(f, make([]byte, 60), 10); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("capacity: %v", err)
	}
	if got, _ := w.contents("f"); string(got) != "0123456789" {
		t.Fatalf("failed writes changed the file: %q", got)
	}

	next = DiskBitFlip
	buf := make([]byte, 10)
	w.await(func(finish func()) { f.ReadAt(buf, 0, func(int, error) { finish() }) })
	if differingBits(buf, []byte("0123456789")) != 1 {
		t.Fatalf("read flip: %q", buf)
	}
	if got, _ := w.contents("f"); string(got) != "0123456789" {
		t.Fatal("a read flip changed the stored data")
	}

	next = DiskBitFlip
	if err := w.sync(f); err != nil {
		t.Fatal(err)
	}
	written, durable := w.disk.File("f")
	if string(written) != "0123456789" || differingBits(durable, written) != 1 {
		t.Fatalf("sync flip: written %q durable %q", written, durable)
	}
	w.crash()
	if got, _ := w.contents("f"); differingBits(got, []byte("0123456789")) != 1 {
		t.Fatalf("flipped durable image not what the crash left: %q", got)
	}
}

func differingBits(a, b []byte) int {
	if len(a) != len(b) {
		return -1
	}
	n := 0
	for i := range a {
		for x := a[i] ^ b[i]; x != 0; x &= x - 1 {
			n++
		}
	}
	return n
}

// A write in flight when the process dies never lands, and its callback
// never runs; a call after death is discarded.
func TestDiskKilledInFlight(t *testing.T) {
	w := newDiskWorld(t, 13, DiskConfig{})
	f := w.create("f")
	w.syncDir("")
	called := false
	f.WriteAt([]byte("lost"), 0, func(error) { called = true })
	w.inc.Kill()
	f.Sync(func(error) { called = true })
	w.sched.Run(100)
	if got, _ := w.contents("f"); len(got) != 0 || called {
		t.Fatalf("in-flight write of a dead process: %q, callback %v", got, called)
	}
	w.disk.Crash(NewRand(1))
	if c := w.disk.Counts(); c.Discarded[DiskSync] != 1 {
		t.Fatalf("counts %+v", c)
	}
}

// Namespace errors and ReadDir order.
func TestDiskNamespace(t *testing.T) {
	w := newDiskWorld(t, 14, DiskConfig{DirectUnsupported: true})
	if _, err := w.open("dir/a", engine.OpenMode{Create: true}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("create without a parent dir: %v", err)
	}
	w.must("mkdir", func(done func(error)) { w.c.MkdirAll("dir", done) })
	for _, n := range []string{"c", "a", "b"} {
		w.create("dir/" + n)
	}
	if _, err := w.open("dir/a", engine.OpenMode{Create: true}); !errors.Is(err, engine.ErrExists) {
		t.Fatalf("create existing: %v", err)
	}
	if _, err := w.open("dir/zz", engine.OpenMode{}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("open missing: %v", err)
	}
	var names []string
	w.await(func(finish func()) { w.c.ReadDir("dir", func(n []string, _ error) { names = n; finish() }) })
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Fatalf("readdir %q", names)
	}
	if err := w.do("rm", func(done func(error)) { w.c.Remove("dir", done) }); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("remove non-empty dir: %v", err)
	}
	f, _ := w.open("dir/a", engine.OpenMode{Write: true, Direct: true})
	if f.Direct() {
		t.Fatal("O_DIRECT not refused with DirectUnsupported")
	}
}

// O_DIRECT transfers must be aligned.
func TestDiskDirectAlignment(t *testing.T) {
	w := newDiskWorld(t, 15, DiskConfig{})
	f, err := w.open("d", engine.OpenMode{Create: true, Write: true, Direct: true})
	if err != nil || !f.Direct() {
		t.Fatalf("open direct: %v", err)
	}
	if err := w.write(f, make([]byte, 100), 0); !errors.Is(err, ErrMisaligned) {
		t.Fatalf("misaligned write: %v", err)
	}
	if err := w.write(f, make([]byte, engine.DirectAlign), engine.DirectAlign); err != nil {
		t.Fatalf("aligned write: %v", err)
	}
}

// A rename across directories is one atomic operation logged in both
// directories: a SyncDir of either makes it durable, old name gone and new
// name present together; without one, exactly one name survives. Catches
// a rename logged only in its source directory.
func TestDiskCrossDirRename(t *testing.T) {
	for _, syncDir := range []string{"", "a", "b"} {
		outcomes := map[bool]int{}
		for seed := uint64(1); seed <= 40; seed++ {
			w := newDiskWorld(t, seed, DiskConfig{})
			w.must("mkdir a", func(done func(error)) { w.c.MkdirAll("a", done) })
			w.must("mkdir b", func(done func(error)) { w.c.MkdirAll("b", done) })
			w.syncDir("")
			f := w.create("a/tmp")
			w.sync(f)
			w.syncDir("a")
			w.must("rename", func(done func(error)) { w.c.Rename("a/tmp", "b/final", done) })
			if syncDir != "" {
				w.syncDir(syncDir)
			}
			w.crash()
			_, tmp := w.contents("a/tmp")
			_, final := w.contents("b/final")
			if tmp == final {
				t.Fatalf("sync %q seed %d: tmp %v final %v: not atomic", syncDir, seed, tmp, final)
			}
			outcomes[final]++
		}
		if (syncDir == "" && len(outcomes) != 2) || (syncDir != "" && outcomes[false] != 0) {
			t.Fatalf("sync %q: outcomes %v", syncDir, outcomes)
		}
	}
}
