package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/skipprd/skipprd/engine"
)

// Allocate reserves the file's blocks: the size grows, the new range
// reads as zeros, and the filesystem reports the blocks as allocated —
// a sparse file (what Truncate makes) has none. A file already longer is
// left as it is.
func TestAllocateReservesBlocks(t *testing.T) {
	td := newTestDisk(t)
	const size = 4 << 20
	for _, direct := range []bool{false, true} {
		name := map[bool]string{false: "buffered", true: "direct"}[direct]
		o := fileOps{td, td.mustOpen(name, engine.OpenMode{Create: true, Write: true, Direct: direct})}
		header := bytes.Repeat([]byte{0xAB}, engine.DirectAlign)
		o.must("allocate", td.call(func(done func(error)) { o.f.Allocate(size, done) }))
		o.must("write", o.writeAt(header, 0))
		o.must("allocate a smaller size", td.call(func(done func(error)) { o.f.Allocate(size/2, done) }))
		o.must("sync", td.call(o.f.Sync))
		o.must("close", td.call(o.f.Close))
		path := filepath.Join(td.root, name)
		got, err := os.ReadFile(path)
		if err != nil || len(got) != size || !bytes.Equal(got[:len(header)], header) || bytes.ContainsFunc(got[len(header):], func(r rune) bool { return r != 0 }) {
			t.Fatalf("%s: %d bytes (want %d), header kept %v, rest zeros? err %v", name, len(got), size, bytes.Equal(got[:len(header)], header), err)
		}
		if blocks := allocatedBytes(t, path); blocks < size {
			t.Fatalf("%s: %d bytes of blocks allocated for a %d-byte file: Allocate left it sparse", name, blocks, size)
		}
	}
}

// zeroFill, the fallback where fallocate is refused, allocates too, and
// keeps what is before its start.
func TestZeroFillAllocates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("head"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	const size = 3<<20 + 4096
	if err := zeroFill(f, 4, size, false); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, _ := os.ReadFile(path)
	if len(got) != size || string(got[:4]) != "head" || bytes.ContainsFunc(got[4:], func(r rune) bool { return r != 0 }) {
		t.Fatalf("zeroFill: %d bytes (want %d), head %q", len(got), size, got[:min(4, len(got))])
	}
	if blocks := allocatedBytes(t, path); blocks < size {
		t.Fatalf("zeroFill left %d of %d bytes unallocated", size-blocks, size)
	}
}

// allocatedBytes is the size of the blocks the filesystem holds for path.
func allocatedBytes(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no block counts on this platform")
	}
	return st.Blocks * 512
}
