package storage

import (
	"errors"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// Requests are counted by operation and by the outcome the engine sees,
// through the real SDK client against gofakes3, and nothing else is.
func TestS3StoreCountsRequests(t *testing.T) {
	l, store := newTestStore(t, newFakeS3(t).URL, S3Options{RequestTimeout: 10 * time.Second})
	put(t, l, store, "k", []byte("body"))
	head := func(key string) error {
		err, _ := Call(l, func(done func(error)) {
			store.HeadObject(key, func(_ engine.ObjectInfo, err error) { done(err) })
		})
		return err
	}
	if err := head("k"); err != nil {
		t.Fatalf("head k: %v", err)
	}
	if err := head("missing"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("head missing: %v, want ErrNotFound", err)
	}
	err, _ := Call(l, func(done func(error)) {
		in := engine.PutObjectInput{Key: "k", Body: []byte("again"), IfNoneMatch: true}
		store.PutObject(in, func(_ string, err error) { done(err) })
	})
	if !errors.Is(err, engine.ErrPreconditionFailed) {
		t.Fatalf("create-only put over k: %v, want ErrPreconditionFailed", err)
	}
	want := map[[2]string]uint64{
		{"put", "ok"}: 1, {"head", "ok"}: 1, {"head", "not-found"}: 1, {"put", "precondition"}: 1,
	}
	checkS3Counts(t, store.Stats(), want)
}

// A request after Close is never sent, and is counted as an error.
func TestS3StoreCountsClosedAsError(t *testing.T) {
	l, store := newTestStore(t, newFakeS3(t).URL, S3Options{})
	store.Close()
	err, _ := Call(l, func(done func(error)) { store.DeleteObject("k", done) })
	if !errors.Is(err, errStoreClosed) {
		t.Fatalf("delete after close: %v", err)
	}
	checkS3Counts(t, store.Stats(), map[[2]string]uint64{{"delete", "error"}: 1})
}

// checkS3Counts compares every (operation, outcome) count with want,
// missing pairs wanting zero.
func checkS3Counts(t *testing.T, st S3Stats, want map[[2]string]uint64) {
	t.Helper()
	for _, op := range S3Ops() {
		for _, out := range S3Outcomes() {
			if got, w := st.Count(op, out), want[[2]string{op.String(), out.String()}]; got != w {
				t.Errorf("%s/%s: %d requests, want %d", op, out, got, w)
			}
		}
	}
}
