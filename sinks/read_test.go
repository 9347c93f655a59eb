package sinks

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/storage"
)

// ReadFile reads a file of the size the caller names, and nothing of
// another size; a missing file is an error.
func TestParquetDirReadFile(t *testing.T) {
	l, sink, _, dir := newOSDiskSink(t, "lake")
	if err := os.MkdirAll(filepath.Join(dir, "lake", "t"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lake", "t", "f"), []byte("twelve bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(rel string, size int64) ([]byte, error) {
		type got struct {
			b   []byte
			err error
		}
		g, stopped := storage.Call(l, func(done func(got)) {
			sink.ReadFile(rel, size, func(b []byte, err error) { done(got{b, err}) })
		})
		if stopped != nil {
			t.Fatal(stopped)
		}
		return g.b, g.err
	}
	if b, err := read("t/f", 12); err != nil || string(b) != "twelve bytes" {
		t.Fatalf("%q, %v", b, err)
	}
	if _, err := read("t/f", 11); err == nil || !strings.Contains(err.Error(), "holds 12 bytes, the table says 11") {
		t.Fatalf("a size off by one: %v", err)
	}
	if _, err := read("t/g", 1); err == nil {
		t.Fatal("a missing file read")
	}
}

// twice answers the bytes only when both reads agree.
func TestReadTwiceComparesReads(t *testing.T) {
	answers := [][]byte{[]byte("abc"), []byte("abd")}
	n := 0
	read := func(done func([]byte, error)) { n++; done(answers[(n-1)%2], nil) }
	var err error
	twice(read, func(_ []byte, e error) { err = e })
	if err == nil || !strings.Contains(err.Error(), "disagree") {
		t.Fatalf("reads that differ: %v", err)
	}
	answers[1] = []byte("abc")
	var b []byte
	twice(read, func(got []byte, e error) { b, err = got, e })
	if err != nil || string(b) != "abc" {
		t.Fatalf("reads that agree: %q, %v", b, err)
	}
	boom := errors.New("boom")
	twice(func(done func([]byte, error)) { done(nil, boom) }, func(_ []byte, e error) { err = e })
	if !errors.Is(err, boom) {
		t.Fatalf("a failed read: %v", err)
	}
}
