package storage

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3bolt"
	bolt "go.etcd.io/bbolt"
)

// An object read from the embedded store keeps its bytes while the store
// deletes it, reuses its pages and grows (and so remaps) the bolt file.
// Over s3bolt alone this test reads unmapped memory and the process dies
// with SIGSEGV, as the daemon did under CI; or, if the pages were reused
// without a remap, it reads another object's bytes.
func TestEmbeddedBackendObjectOutlivesWrites(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "wal.bolt"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := newBoltBackend(s3bolt.New(db))
	if err := b.CreateBucket("b"); err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("segment body "), 4096)
	putBolt(t, b, "held", want)
	got, err := b.GetObject("b", "held", nil)
	if err != nil {
		t.Fatal(err)
	}
	head, err := b.HeadObject("b", "held")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.DeleteObject("b", "held"); err != nil {
		t.Fatal(err)
	}
	filler := bytes.Repeat([]byte{0xA5}, 1<<20)
	for i := range 48 { // 48 MiB: several remaps of the file's map
		putBolt(t, b, fmt.Sprintf("filler-%02d", i), filler)
	}
	body, err := io.ReadAll(got.Contents)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, want) {
		t.Fatalf("object read before the writes changed under them: %d bytes, want %d", len(body), len(want))
	}
	sum := md5.Sum(want)
	for name, hash := range map[string][]byte{"GET": got.Hash, "HEAD": head.Hash} {
		if !bytes.Equal(hash, sum[:]) {
			t.Errorf("%s hash %x after the writes, want %x", name, hash, sum)
		}
	}
}

// A ranged GET is copied whole: exactly the range's bytes.
func TestEmbeddedBackendRange(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "wal.bolt"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := newBoltBackend(s3bolt.New(db))
	if err := b.CreateBucket("b"); err != nil {
		t.Fatal(err)
	}
	putBolt(t, b, "k", []byte("0123456789"))
	rng := &gofakes3.ObjectRangeRequest{Start: 2, End: 5}
	got, err := b.GetObject("b", "k", rng)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(got.Contents)
	if string(body) != "2345" {
		t.Fatalf("range 2-5: %q", body)
	}
}

func putBolt(t *testing.T, b *boltBackend, key string, data []byte) {
	t.Helper()
	if _, err := b.PutObject("b", key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}
