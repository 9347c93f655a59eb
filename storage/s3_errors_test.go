package storage

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// These tests put a real HTTP server that misbehaves in a known way
// behind the real SDK client, and check the error the engine sees.

// s3ErrorServer answers every request with status and an S3 error body
// carrying code, and counts requests (one per engine request: the SDK
// must not retry).
func s3ErrorServer(t *testing.T, status int, code string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>test</Message><RequestId>1</RequestId></Error>`, code)
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

// putErr issues one PutObject and returns its error.
func putErr(t *testing.T, l *Loop, store *S3Store, key string) error {
	t.Helper()
	err, stopped := Call(l, func(done func(error)) {
		store.PutObject(engine.PutObjectInput{Key: key, Body: []byte("body"), IfNoneMatch: true},
			func(_ string, err error) { done(err) })
	})
	if stopped != nil {
		t.Fatal(stopped)
	}
	return err
}

// getErr issues one GetObject and returns its error.
func getErr(t *testing.T, l *Loop, store *S3Store, key string, limit int64) error {
	t.Helper()
	err, stopped := Call(l, func(done func(error)) {
		store.GetObject(engine.GetObjectInput{Key: key, Limit: limit},
			func(_ []byte, _ engine.ObjectInfo, err error) { done(err) })
	})
	if stopped != nil {
		t.Fatal(stopped)
	}
	return err
}

func TestS3StatusMapping(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		code   string
		want   error // nil: a definite error with no sentinel
	}{
		{"503 SlowDown is throttling", 503, "SlowDown", engine.ErrThrottled},
		{"503 without SlowDown is throttling", 503, "ServiceUnavailable", engine.ErrThrottled},
		{"500 is ambiguous", 500, "InternalError", engine.ErrAmbiguous},
		{"502 is ambiguous", 502, "BadGateway", engine.ErrAmbiguous},
		{"412 is a failed precondition", 412, "PreconditionFailed", engine.ErrPreconditionFailed},
		{"404 NoSuchUpload", 404, "NoSuchUpload", engine.ErrNoSuchUpload},
		{"404 NoSuchKey", 404, "NoSuchKey", engine.ErrNotFound},
		{"403 is refused for good", 403, "AccessDenied", engine.ErrRefused},
		{"401 is refused for good", 401, "Unauthorized", engine.ErrRefused},
		{"404 NoSuchBucket is refused for good, not a missing key", 404, "NoSuchBucket", engine.ErrRefused},
		{"400 is definite", 400, "InvalidArgument", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, requests := s3ErrorServer(t, c.status, c.code)
			l, store := newTestStore(t, srv.URL, S3Options{RequestTimeout: 5 * time.Second})
			err := putErr(t, l, store, "k/1")
			if err == nil {
				t.Fatal("no error")
			}
			checkSentinel(t, err, c.want)
			if !strings.Contains(err.Error(), "PutObject") || !strings.Contains(err.Error(), "k/1") {
				t.Errorf("error does not name the operation and key: %v", err)
			}
			if n := requests.Load(); n != 1 {
				t.Errorf("%d HTTP requests for one engine request: the SDK retried", n)
			}
		})
	}
}

// checkSentinel fails unless err wraps exactly want among the engine's
// store sentinels (none, when want is nil).
func checkSentinel(t *testing.T, err, want error) {
	t.Helper()
	for _, s := range []error{engine.ErrAmbiguous, engine.ErrNotFound, engine.ErrPreconditionFailed,
		engine.ErrThrottled, engine.ErrNoSuchUpload, engine.ErrTooLarge, engine.ErrRefused} {
		if errors.Is(err, s) != (s == want) {
			t.Fatalf("error %q: wraps %q = %v, want only %v", err, s, errors.Is(err, s), want)
		}
	}
}

// hangingServer accepts requests and never answers until the test ends.
func hangingServer(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: frees handlers so Close can return
	return srv
}

func TestS3TimeoutIsAmbiguous(t *testing.T) {
	l, store := newTestStore(t, hangingServer(t).URL, S3Options{RequestTimeout: 200 * time.Millisecond})
	start := time.Now()
	err := putErr(t, l, store, "slow")
	checkSentinel(t, err, engine.ErrAmbiguous)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("timed out after %v with a 200ms request timeout", elapsed)
	}
}

func TestS3CloseCancelsInFlightAndRefusesLater(t *testing.T) {
	l, store := newTestStore(t, hangingServer(t).URL, S3Options{RequestTimeout: time.Minute})
	go func() {
		time.Sleep(50 * time.Millisecond)
		store.Close()
	}()
	checkSentinel(t, putErr(t, l, store, "in-flight"), engine.ErrAmbiguous)
	err := putErr(t, l, store, "after-close")
	if !errors.Is(err, errStoreClosed) {
		t.Fatalf("request after Close: %v, want errStoreClosed", err)
	}
	checkSentinel(t, err, nil)
}

// streamingServer answers GETs with offered bytes of zeros, declaring
// declaredLength as Content-Length (or none, sending the body chunked,
// when it is negative), and reports how many bytes it managed to write
// before the client went away.
func streamingServer(t *testing.T, declaredLength, offered int64) (*httptest.Server, <-chan int64) {
	t.Helper()
	written := make(chan int64, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"0123"`)
		if declaredLength >= 0 {
			w.Header().Set("Content-Length", fmt.Sprint(declaredLength))
		}
		w.WriteHeader(http.StatusOK)
		chunk := make([]byte, 64<<10)
		var n int64
		for n < offered {
			m, err := w.Write(chunk)
			n += int64(m)
			if err != nil {
				break
			}
			w.(http.Flusher).Flush()
		}
		written <- n
	}))
	t.Cleanup(srv.Close)
	return srv, written
}

// A GET whose declared length exceeds the limit is refused before the
// body is read: the server gets to write only what socket buffers hold,
// far less than the limit. A body with no declared length is cut off after
// limit+1 bytes: the server writes the limit plus buffers, far less than
// the 256 MiB it offers.
func TestS3GetOverLimitIsRefusedWithoutReadingTheBody(t *testing.T) {
	const limit = 16 << 20
	const offered = 256 << 20
	const buffersMax = 16 << 20 // loopback socket buffers hold a few MiB
	for _, c := range []struct {
		name       string
		declared   int64
		writtenMax int64
	}{
		{"Content-Length over the limit", offered, limit},
		{"chunked, no length", -1, limit + buffersMax},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, written := streamingServer(t, c.declared, offered)
			l, store := newTestStore(t, srv.URL, S3Options{RequestTimeout: 10 * time.Second})
			checkSentinel(t, getErr(t, l, store, "big", limit), engine.ErrTooLarge)
			select {
			case n := <-written:
				t.Logf("server wrote %d of %d bytes offered", n, int64(offered))
				if n > c.writtenMax {
					t.Fatalf("server wrote %d bytes, want at most %d: the client read on", n, c.writtenMax)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the server is still writing: the client kept the body open")
			}
		})
	}
}

// A store that is down — nothing listens — refuses the connection: the
// request was never sent, so the error is definite, not ambiguous (an
// ambiguous marker would hold ingest for the store's request lifetime
// after the store is back). A connection cut after the request was sent
// stays ambiguous.
func TestS3RefusedConnectionIsDefinite(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	l, store := newTestStore(t, closed, S3Options{RequestTimeout: 5 * time.Second})
	err = putErr(t, l, store, "k/1")
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("a put to a closed port: %v", err)
	}
	checkSentinel(t, err, nil)

	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}))
	defer cut.Close()
	l, store = newTestStore(t, cut.URL, S3Options{RequestTimeout: 5 * time.Second})
	checkSentinel(t, putErr(t, l, store, "k/2"), engine.ErrAmbiguous)
}
