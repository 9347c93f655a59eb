package storage

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/diskstore"
	"github.com/skipprd/skipprd/internal/storetest"
)

// The disk-backed object store (local-disk mode's segment directory) over
// real files passes the same conformance suite as the S3 adapter.
func TestDiskStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		td := newTestDisk(t)
		store := diskstore.New(td.d, td.l.Clock(), NewRand(), "segments")
		return storetest.Harness{Store: store, Await: await(t, td.l)}
	})
}

// On real files: the layout doc.go describes (a key that is also a
// prefix, "-" sorting before "/"), no temp file or upload left behind,
// and a second store over the same directory — a restarted process —
// reads and lists what the first wrote.
func TestDiskStoreOnRealFiles(t *testing.T) {
	td := newTestDisk(t)
	first := diskstore.New(td.d, td.l.Clock(), NewRand(), "segments")
	keys := []string{"pipe/p_year=2026/000-001.seg", "pipe/_writer", "pipe", "pipe-x"}
	for _, k := range keys {
		err, _ := Call(td.l, func(done func(error)) {
			first.PutObject(engine.PutObjectInput{Key: k, Body: []byte("body of " + k)}, func(_ string, err error) { done(err) })
		})
		if err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	type result struct {
		id  string
		err error
	}
	// A multipart object, so the uploads directory is used and emptied.
	up, _ := Call(td.l, func(done func(result)) {
		first.CreateMultipartUpload("pipe/mp", func(id string, err error) { done(result{id, err}) })
	})
	if up.err != nil {
		t.Fatal(up.err)
	}
	part, _ := Call(td.l, func(done func(result)) {
		first.UploadPart("pipe/mp", up.id, 1, []byte("body of pipe/mp"), func(e string, err error) { done(result{e, err}) })
	})
	done, _ := Call(td.l, func(done func(error)) {
		first.CompleteMultipartUpload("pipe/mp", up.id, []engine.CompletedPart{{Number: 1, ETag: part.id}}, done)
	})
	if part.err != nil || done != nil {
		t.Fatalf("multipart: %v %v", part.err, done)
	}
	keys = append(keys, "pipe/mp")

	var files []string
	err := filepath.WalkDir(td.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(td.root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	want := []string{
		"segments/objects/pipe-x.o",
		"segments/objects/pipe.d/_writer.o",
		"segments/objects/pipe.d/mp.o",
		"segments/objects/pipe.d/p_year=2026.d/000-001.seg.o",
		"segments/objects/pipe.o",
	}
	if err != nil || !slices.Equal(files, want) {
		t.Fatalf("files on disk:\n%q\nwant\n%q (%v)", files, want, err)
	}
	if ups, err := os.ReadDir(filepath.Join(td.root, "segments", "uploads")); err != nil || len(ups) != 0 {
		t.Fatalf("uploads directory after complete: %v %v", ups, err)
	}

	second := diskstore.New(td.d, td.l.Clock(), NewRand(), "segments")
	h := storetest.Harness{Store: second, Await: await(t, td.l)}
	var listed []string
	h.Await(func(finish func()) {
		second.ListObjects("pipe", "", func(p engine.ListPage, err error) {
			if err != nil {
				t.Errorf("list: %v", err)
			}
			for _, o := range p.Objects {
				listed = append(listed, o.Key)
				if !strings.HasPrefix(o.ETag, `"`) || o.Size != int64(len("body of "+o.Key)) {
					t.Errorf("listed %+v", o)
				}
			}
			finish()
		})
	})
	slices.Sort(keys)
	if !slices.Equal(listed, keys) {
		t.Fatalf("the reopened store lists %q, want %q", listed, keys)
	}
	for _, k := range keys {
		var body []byte
		h.Await(func(finish func()) {
			second.GetObject(engine.GetObjectInput{Key: k, Limit: 100}, func(b []byte, _ engine.ObjectInfo, err error) {
				if err != nil {
					t.Errorf("get %s: %v", k, err)
				}
				body = b
				finish()
			})
		})
		if string(body) != "body of "+k {
			t.Fatalf("get %s: %q", k, body)
		}
	}
}
