package storage

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ncw/directio"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/logbuf"
)

// testDisk is an OSDisk on a running loop over a fresh temp dir, with its
// log captured.
type testDisk struct {
	t    testing.TB
	l    *Loop
	d    *OSDisk
	root string
	log  *logbuf.Buffer
}

func newTestDisk(t testing.TB) *testDisk {
	t.Helper()
	root := t.TempDir()
	logs := &logbuf.Buffer{}
	l := startLoop(t)
	d, err := NewOSDisk(l, root, DiskOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return &testDisk{t: t, l: l, d: d, root: root, log: logs}
}

// call runs start on the loop and returns the error its done reports.
func (td *testDisk) call(start func(done func(error))) error {
	td.t.Helper()
	err, stopped := Call(td.l, start)
	if stopped != nil {
		td.t.Fatal(stopped)
	}
	return err
}

type openResult struct {
	f   engine.File
	err error
}

func (td *testDisk) open(path string, mode engine.OpenMode) (engine.File, error) {
	td.t.Helper()
	r, err := Call(td.l, func(done func(openResult)) {
		td.d.Open(path, mode, func(f engine.File, err error) { done(openResult{f, err}) })
	})
	if err != nil {
		td.t.Fatal(err)
	}
	return r.f, r.err
}

func (td *testDisk) mustOpen(path string, mode engine.OpenMode) engine.File {
	td.t.Helper()
	f, err := td.open(path, mode)
	if err != nil {
		td.t.Fatalf("open %s %+v: %v", path, mode, err)
	}
	return f
}

func (td *testDisk) readDir(dir string) []string {
	td.t.Helper()
	var names []string
	if err := td.call(func(done func(error)) {
		td.d.ReadDir(dir, func(n []string, err error) { names = n; done(err) })
	}); err != nil {
		td.t.Fatalf("readdir %s: %v", dir, err)
	}
	return names
}

// fileOps wraps one File's calls for a test, each awaited on the loop.
type fileOps struct {
	td *testDisk
	f  engine.File
}

func (o fileOps) writeAt(p []byte, off int64) error {
	return o.td.call(func(done func(error)) { o.f.WriteAt(p, off, done) })
}

func (o fileOps) append(p []byte) (off int64, err error) {
	err = o.td.call(func(done func(error)) {
		o.f.Append(p, func(at int64, e error) { off = at; done(e) })
	})
	return off, err
}

func (o fileOps) readAt(p []byte, off int64) (n int, err error) {
	err = o.td.call(func(done func(error)) {
		o.f.ReadAt(p, off, func(m int, e error) { n = m; done(e) })
	})
	return n, err
}

func (o fileOps) size() int64 {
	var size int64
	if err := o.td.call(func(done func(error)) {
		o.f.Size(func(s int64, e error) { size = s; done(e) })
	}); err != nil {
		o.td.t.Fatalf("size: %v", err)
	}
	return size
}

func (o fileOps) must(what string, err error) {
	o.td.t.Helper()
	if err != nil {
		o.td.t.Fatalf("%s: %v", what, err)
	}
}

func TestDiskOpenCreateExistsAndNotFound(t *testing.T) {
	td := newTestDisk(t)
	f := td.mustOpen("new.wal", engine.OpenMode{Create: true, Write: true})
	if f.Direct() {
		t.Fatal("a buffered open reports Direct")
	}
	if _, err := td.open("new.wal", engine.OpenMode{Create: true, Write: true}); !errors.Is(err, engine.ErrExists) {
		t.Fatalf("create over an existing file: %v, want ErrExists", err)
	}
	for name, err := range map[string]error{
		"open":    openErr(td, "missing"),
		"remove":  td.call(func(done func(error)) { td.d.Remove("missing", done) }),
		"rename":  td.call(func(done func(error)) { td.d.Rename("missing", "other", done) }),
		"readdir": td.call(func(done func(error)) { td.d.ReadDir("missing", func(_ []string, e error) { done(e) }) }),
		"syncdir": td.call(func(done func(error)) { td.d.SyncDir("missing", done) }),
	} {
		if !errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), "missing") {
			t.Errorf("%s of a missing path: %v, want ErrNotFound naming the path", name, err)
		}
	}
}

func openErr(td *testDisk, path string) error {
	_, err := td.open(path, engine.OpenMode{Write: true})
	return err
}

func TestDiskFileWriteAppendReadSizeTruncate(t *testing.T) {
	td := newTestDisk(t)
	o := fileOps{td, td.mustOpen("f", engine.OpenMode{Create: true, Write: true})}
	for i, want := range []int64{0, 5} {
		off, err := o.append([]byte("hello world")[i*5 : i*5+5+i])
		o.must("append", err)
		if off != want {
			t.Fatalf("append %d at %d, want %d", i, off, want)
		}
	}
	o.must("write", o.writeAt([]byte("W"), 6))
	p := make([]byte, 20)
	n, err := o.readAt(p, 0)
	if err != nil || string(p[:n]) != "hello World" {
		t.Fatalf("read to end of file: %q %v, want %q and no error", p[:n], err, "hello World")
	}
	if s := o.size(); s != 11 {
		t.Fatalf("size %d, want 11", s)
	}
	o.must("truncate", td.call(func(done func(error)) { o.f.Truncate(5, done) }))
	if off, err := o.append([]byte("!")); err != nil || off != 5 {
		t.Fatalf("append after truncate: at %d %v, want 5", off, err)
	}
	o.must("write past the end", o.writeAt([]byte("$"), 9)) // a hole, and a new end
	if off, err := o.append([]byte("?")); err != nil || off != 10 {
		t.Fatalf("append after a write past the end: at %d %v, want 10", off, err)
	}
	o.must("sync", td.call(o.f.Sync))
	o.must("close", td.call(o.f.Close))
	onDisk, err := os.ReadFile(filepath.Join(td.root, "f"))
	if err != nil || string(onDisk) != "hello!\x00\x00\x00$?" {
		t.Fatalf("file holds %q %v", onDisk, err)
	}
	// A reopened file appends at its size.
	o = fileOps{td, td.mustOpen("f", engine.OpenMode{Write: true})}
	if off, err := o.append([]byte("+")); err != nil || off != 11 {
		t.Fatalf("append after reopen: at %d %v, want 11", off, err)
	}
	o.must("close", td.call(o.f.Close))
}

func TestDiskDirectoryOperations(t *testing.T) {
	td := newTestDisk(t)
	if err := td.call(func(done func(error)) { td.d.MkdirAll("a/b", done) }); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"z", "a", "m", "B", "a0"} {
		f := td.mustOpen("a/b/"+name, engine.OpenMode{Create: true, Write: true})
		fileOps{td, f}.must("close", td.call(f.Close))
	}
	if got, want := td.readDir("a/b"), []string{"B", "a", "a0", "m", "z"}; !slices.Equal(got, want) {
		t.Fatalf("readdir: %q, want %q", got, want)
	}
	steps := []func(done func(error)){
		func(done func(error)) { td.d.Rename("a/b/z", "a/b/y", done) },
		func(done func(error)) { td.d.Rename("a/b/a0", "a/b/a", done) }, // replaces a
		func(done func(error)) { td.d.Remove("a/b/m", done) },
		func(done func(error)) { td.d.SyncDir("a/b", done) },
		func(done func(error)) { td.d.SyncDir("", done) }, // the root itself
		func(done func(error)) { td.d.SyncDir(".", done) },
	}
	for i, step := range steps {
		if err := td.call(step); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if got, want := td.readDir("a/b"), []string{"B", "a", "y"}; !slices.Equal(got, want) {
		t.Fatalf("readdir after rename and remove: %q, want %q", got, want)
	}
	if got := td.readDir(""); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("readdir of the root: %q", got)
	}
}

func TestDiskRejectsPathsOutsideTheRoot(t *testing.T) {
	td := newTestDisk(t)
	for _, path := range []string{"../escape", "/etc/passwd", "a/../../b"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("path %q was accepted", path)
				}
			}()
			td.d.resolve(path)
		}()
	}
}

// Many calls queued on one file before any completes: completions arrive
// in call order, never inside the call, and see each other's effects.
func TestDiskFileCallsCompleteInCallOrder(t *testing.T) {
	td := newTestDisk(t)
	f := td.mustOpen("order", engine.OpenMode{Create: true, Write: true})
	const calls = 2000
	type record struct {
		call int
		val  int64
	}
	got, err := Call(td.l, func(done func([]record)) {
		var records []record
		inCall := false
		complete := func(call int, val int64, err error) {
			if err != nil || inCall {
				t.Errorf("call %d: err %v, completed inside the call: %v", call, err, inCall)
			}
			records = append(records, record{call, val})
			if len(records) == calls {
				done(records)
			}
		}
		for i := range calls {
			inCall = true
			if i%2 == 0 {
				f.Append([]byte{byte(i)}, func(off int64, err error) { complete(i, off, err) })
			} else {
				f.Size(func(size int64, err error) { complete(i, size, err) })
			}
			inCall = false
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		// Call i (even) is append number i/2, landing at offset i/2; call i
		// (odd) sees the (i+1)/2 appends made before it.
		if r.call != i || r.val != int64((i+1)/2) {
			t.Fatalf("completion %d: call %d with %d, want call %d with %d", i, r.call, r.val, i, (i+1)/2)
		}
	}
}

// Sync after a failed Sync must fail too, even if the retry would "work".
func TestDiskFailedSyncPoisonsTheFile(t *testing.T) {
	td := newTestDisk(t)
	f := td.mustOpen("poison", engine.OpenMode{Create: true, Write: true})
	// A real failure of fdatasync(2): the descriptor is gone.
	if err := f.(*osFile).f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := td.call(f.Sync); err == nil {
		t.Fatal("sync on a closed descriptor succeeded")
	}
	err := td.call(f.Sync)
	if err == nil || !strings.Contains(err.Error(), "an earlier sync failed") {
		t.Fatalf("second sync: %v, want the earlier failure", err)
	}
}

// directRoundTrip writes aligned and unaligned-address buffers through a
// Direct file and reads them back, including through the filesystem.
func directRoundTrip(t *testing.T, td *testDisk, path string, f engine.File) {
	t.Helper()
	o := fileOps{td, f}
	block := directio.AlignedBlock(2 * engine.DirectAlign)
	for i := range block {
		block[i] = byte(i % 251)
	}
	o.must("write aligned", o.writeAt(block, 0))
	// Aligned offset and length, misaligned address: goes through a bounce
	// buffer.
	odd := directio.AlignedBlock(engine.DirectAlign + 1)[1:]
	for i := range odd {
		odd[i] = byte(i % 13)
	}
	if off, err := o.append(odd); err != nil || off != 2*engine.DirectAlign {
		t.Fatalf("append: at %d %v, want %d", off, err, 2*engine.DirectAlign)
	}
	o.must("sync", td.call(f.Sync))
	back := directio.AlignedBlock(4 * engine.DirectAlign)
	n, err := o.readAt(back, 0)
	want := append(slices.Clone(block), odd...)
	if err != nil || !bytes.Equal(back[:n], want) {
		t.Fatalf("read back %d bytes (%v), want %d equal bytes", n, err, len(want))
	}
	oddBack := directio.AlignedBlock(engine.DirectAlign + 1)[1:]
	if n, err := o.readAt(oddBack, 2*engine.DirectAlign); err != nil || n != len(odd) || !bytes.Equal(oddBack, odd) {
		t.Fatalf("read into a misaligned buffer: %d %v", n, err)
	}
	o.must("close", td.call(f.Close))
	onDisk, err := os.ReadFile(filepath.Join(td.root, path))
	if err != nil || !bytes.Equal(onDisk, want) {
		t.Fatalf("the file holds %d bytes (%v), want the %d written", len(onDisk), err, len(want))
	}
}

func TestDiskDirectIOOnTheTempDir(t *testing.T) {
	td := newTestDisk(t)
	f := td.mustOpen("direct", engine.OpenMode{Create: true, Write: true, Direct: true})
	refused := strings.Contains(td.log.String(), "refused O_DIRECT")
	t.Logf("O_DIRECT on %s: Direct()=%v, fallback logged=%v", td.root, f.Direct(), refused)
	if f.Direct() == refused {
		t.Fatalf("Direct()=%v but fallback logged=%v: exactly one must hold", f.Direct(), refused)
	}
	directRoundTrip(t, td, "direct", f)
}

// The filesystems on a test machine may all accept O_DIRECT (tmpfs does
// since Linux 6.6), so the refusal is injected at the one call that would
// get EINVAL from the kernel; everything else is real.
func TestDiskDirectFallbackWhenRefused(t *testing.T) {
	td := newTestDisk(t)
	td.d.openDirect = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EINVAL}
	}
	f := td.mustOpen("fallback", engine.OpenMode{Create: true, Write: true, Direct: true})
	if f.Direct() {
		t.Fatal("Direct() after the filesystem refused O_DIRECT")
	}
	directRoundTrip(t, td, "fallback", f)
	// Reopen (no Create): still falls back; alignment is still enforced.
	o := fileOps{td, td.mustOpen("fallback", engine.OpenMode{Write: true, Direct: true})}
	if err := o.writeAt([]byte("x"), 0); !errors.Is(err, errMisaligned) {
		t.Fatalf("misaligned write in fallback mode: %v, want errMisaligned", err)
	}
	if _, err := td.open("fallback", engine.OpenMode{Create: true, Write: true, Direct: true}); !errors.Is(err, engine.ErrExists) {
		t.Fatalf("create over the fallback file: %v, want ErrExists", err)
	}
	if n := strings.Count(td.log.String(), "refused O_DIRECT"); n != 1 {
		t.Fatalf("the refusal was logged %d times, want once:\n%s", n, td.log.String())
	}
}

func TestDiskDirectRejectsMisalignedIO(t *testing.T) {
	td := newTestDisk(t)
	o := fileOps{td, td.mustOpen("strict", engine.OpenMode{Create: true, Write: true, Direct: true})}
	block := directio.AlignedBlock(engine.DirectAlign)
	cases := map[string]error{
		"write at a misaligned offset": o.writeAt(block, 100),
		"write of a misaligned length": o.writeAt(block[:100], 0),
		"append of a misaligned length": func() error {
			_, err := o.append(block[:100])
			return err
		}(),
		"read at a misaligned offset": func() error {
			_, err := o.readAt(block, 512)
			return err
		}(),
	}
	for name, err := range cases {
		if !errors.Is(err, errMisaligned) || !strings.Contains(err.Error(), fmt.Sprint(engine.DirectAlign)) {
			t.Errorf("%s: %v, want errMisaligned naming the alignment", name, err)
		}
	}
	if s := o.size(); s != 0 {
		t.Fatalf("refused writes changed the file: size %d", s)
	}
	o.must("truncate", td.call(func(done func(error)) { o.f.Truncate(100, done) }))
	if _, err := o.append(block); !errors.Is(err, errMisaligned) {
		t.Fatalf("append at a misaligned end of file: %v, want errMisaligned", err)
	}
}
