package storage

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

const embeddedTestBucket = "skipprd-wal"

// embeddedTestRequestTimeout is short so that the recoveries here wait
// a short fence.
const embeddedTestRequestTimeout = 500 * time.Millisecond

func startEmbedded(t *testing.T, path string) *EmbeddedS3 {
	t.Helper()
	e, err := StartEmbeddedS3(path, embeddedTestBucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// getObject reads key through store.
func getObject(t *testing.T, l *Loop, store *S3Store, key string) ([]byte, error) {
	t.Helper()
	type result struct {
		body []byte
		err  error
	}
	got, err := Call(l, func(done func(result)) {
		store.GetObject(engine.GetObjectInput{Key: key, Limit: 64 << 20},
			func(b []byte, _ engine.ObjectInfo, err error) { done(result{b, err}) })
	})
	if err != nil {
		t.Fatalf("loop: %v", err)
	}
	return got.body, got.err
}

// Objects written through S3Store — a PUT, a multipart upload and a
// conditional create — survive closing the embedded store and starting
// it again on the same bolt file; the bucket is not recreated over them.
func TestEmbeddedS3SurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wal-s3.bolt")
	small := bytes.Repeat([]byte("segment "), 1000)
	part := bytes.Repeat([]byte{0xAB}, 5<<20) // S3's minimum non-final part

	first, err := StartEmbeddedS3(path, embeddedTestBucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := startLoop(t)
	store := NewS3Store(l, first.Client(), first.Bucket(), S3Options{RequestTimeout: 10 * time.Second})
	if err := store.CheckBucket(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	put(t, l, store, "wal/a.seg", small)
	multipartPut(t, l, store, "wal/b.seg", [][]byte{part, small})
	if err := createOnly(t, l, store, "wal/a.seg.commit", []byte("marker")); err != nil {
		t.Fatalf("first create: %v", err)
	}
	if err := createOnly(t, l, store, "wal/a.seg.commit", []byte("other")); !errors.Is(err, engine.ErrPreconditionFailed) {
		t.Fatalf("second create of the same key: %v, want ErrPreconditionFailed", err)
	}
	store.Close()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second := startEmbedded(t, path)
	if second.Endpoint() == "" || second.Bucket() != embeddedTestBucket {
		t.Fatalf("endpoint %q bucket %q", second.Endpoint(), second.Bucket())
	}
	l2 := startLoop(t)
	store2 := NewS3Store(l2, second.Client(), second.Bucket(), S3Options{RequestTimeout: 10 * time.Second})
	t.Cleanup(store2.Close)
	for key, want := range map[string][]byte{
		"wal/a.seg":        small,
		"wal/b.seg":        append(append([]byte(nil), part...), small...),
		"wal/a.seg.commit": []byte("marker"),
	} {
		got, err := getObject(t, l2, store2, key)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after restart: %d bytes, %v; want %d bytes", key, len(got), err, len(want))
		}
	}
}

func createOnly(t *testing.T, l *Loop, store *S3Store, key string, body []byte) error {
	t.Helper()
	err, loopErr := Call(l, func(done func(error)) {
		store.PutObject(engine.PutObjectInput{Key: key, Body: body, IfNoneMatch: true}, func(_ string, err error) { done(err) })
	})
	if loopErr != nil {
		t.Fatal(loopErr)
	}
	return err
}

func multipartPut(t *testing.T, l *Loop, store *S3Store, key string, parts [][]byte) {
	t.Helper()
	type answer struct {
		v   string
		err error
	}
	call := func(step string, start func(done func(string, error))) string {
		a, err := Call(l, func(done func(answer)) {
			start(func(v string, err error) { done(answer{v, err}) })
		})
		if err == nil {
			err = a.err
		}
		if err != nil {
			t.Fatalf("multipart %s: %s: %v", key, step, err)
		}
		return a.v
	}
	id := call("create", func(done func(string, error)) { store.CreateMultipartUpload(key, done) })
	var completed []engine.CompletedPart
	for i, p := range parts {
		n := int32(i + 1)
		etag := call(fmt.Sprintf("part %d", n), func(done func(string, error)) { store.UploadPart(key, id, n, p, done) })
		completed = append(completed, engine.CompletedPart{Number: n, ETag: etag})
	}
	call("complete", func(done func(string, error)) {
		store.CompleteMultipartUpload(key, id, completed, func(err error) { done("", err) })
	})
}

// The WAL itself survives a restart: units a host committed on the
// embedded store are found by the recovery of a new host on a new store
// process over the same file, offsets included.
func TestEmbeddedS3WALSurvivesRestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "wal-s3.bolt")
	ctx := testCtx(t)
	// Production settings, with the fence just above this test's short
	// request timeout (engine.Config.FenceWait) so recovery is quick.
	cfg := engine.DeriveConfig("wal", "embedded-test", 4<<20, 4, 2*time.Second)
	cfg.FenceWait = embeddedTestRequestTimeout + embeddedTestRequestTimeout/4
	newHost := func(e *EmbeddedS3) *Host {
		l := NewLoop()
		store := NewS3Store(l, e.Client(), e.Bucket(), S3Options{RequestTimeout: embeddedTestRequestTimeout})
		if err := store.CheckBucket(ctx); err != nil {
			t.Fatal(err)
		}
		h, err := NewHost(cfg, l, HostPorts{Store: store, Memory: NewSystemMemory(MemoryFallbackBytes, nil)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Kill)
		if err := h.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return h
	}

	first, err := StartEmbeddedS3(path, embeddedTestBucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newHost(first)
	for i, ns := range []string{"events", "orders"} {
		u := walSpec{uid: ns, ns: ns, rows: 50, payloadBytes: 64}.unit()
		u.Offsets = segment.Offsets{{Key: "gen/" + ns, Value: uint64(10 * (i + 1))}}
		err := h.Ingest(ctx, u)
		releaseUnit(u)
		if err != nil {
			t.Fatalf("ingest %s: %v", ns, err)
		}
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	h2 := newHost(startEmbedded(t, path))
	offsets, err := h2.Offsets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := segment.Offsets{{Key: "gen/events", Value: 10}, {Key: "gen/orders", Value: 20}}
	if !offsets.Covers(want) || !want.Covers(offsets) {
		t.Fatalf("recovered offsets %v, want %v", offsets, want)
	}
	segs, err := h2.Segments(ctx)
	if err != nil || len(segs) == 0 {
		t.Fatalf("recovered %d segments, %v", len(segs), err)
	}
}

// A second store on a file that is in use fails fast with
// ErrEmbeddedLocked instead of serving the same WAL twice.
func TestEmbeddedS3RefusesAFileInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wal-s3.bolt")
	startEmbedded(t, path)
	start := time.Now()
	e, err := StartEmbeddedS3(path, embeddedTestBucket, nil)
	if err == nil {
		_ = e.Close()
	}
	if !errors.Is(err, ErrEmbeddedLocked) {
		t.Fatalf("second open: %v, want ErrEmbeddedLocked", err)
	}
	if waited := time.Since(start); waited > embeddedLockWait+2*time.Second {
		t.Fatalf("waited %v for the lock", waited)
	}
}

// A connection that never sent a request (an HTTP client may dial one
// for a request that was then cancelled, and keep it idle) must not hold
// Close: net/http's Shutdown waits for it for 5 s and then fails, which
// made a clean daemon stop exit 1.
func TestEmbeddedS3CloseWithAnUnusedConnection(t *testing.T) {
	e := startEmbedded(t, filepath.Join(t.TempDir(), "wal.bolt"))
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.Endpoint(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for e.freshConns() == 0 { // the server has accepted it
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if err := e.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if d := time.Since(start); d > embeddedShutdownWait/2 {
		t.Fatalf("close took %v", d)
	}
}
