package httpsrc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/skipprd/skipprd/engine"
)

// host records the units handed to it and answers with answer.
type host struct {
	mu     sync.Mutex
	units  []engine.Unit
	answer error
}

func (h *host) ingest(_ context.Context, u engine.Unit) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.answer == nil {
		for _, b := range u.Batches {
			b.Retain()
		}
		h.units = append(h.units, u)
	}
	return h.answer
}

func newServer(t *testing.T, cfg Config, h *host) *httptest.Server {
	t.Helper()
	hd, err := New(cfg, h.ingest)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hd)
	t.Cleanup(srv.Close)
	return srv
}

type reply struct {
	status     int
	retryAfter string
	body       map[string]any
}

func post(t *testing.T, url, ctype, key, token, body string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if err := json.Unmarshal(b, &r.body); err != nil {
		t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, b)
	}
	return r
}

const jsonl = "application/x-ndjson"

func TestHandlerAccepts(t *testing.T) {
	h := &host{}
	srv := newServer(t, Config{Name: "api", DefaultSink: "lake"}, h)
	r := post(t, srv.URL+"/v1/ingest/events", jsonl, "k1", "", `{"a":1}`+"\n"+`{"a":2,"b":"x"}`)
	if r.status != http.StatusOK || r.body["rows"] != float64(2) {
		t.Fatalf("answer %+v", r)
	}
	if len(h.units) != 1 {
		t.Fatalf("%d units handed over", len(h.units))
	}
	u := h.units[0]
	if u.Key.SinkRef != "lake" || u.Key.Namespace != "events" || u.IdempotencyKey != "http/events/k1" {
		t.Fatalf("unit key %+v idempotency %q", u.Key, u.IdempotencyKey)
	}
}

// Every refusal has its status, names what was wrong, and hands nothing
// to the host.
func TestHandlerRefuses(t *testing.T) {
	h := &host{}
	lim := DefaultLimits()
	lim.BodyBytes = 64
	srv := newServer(t, Config{Name: "api", DefaultSink: "lake", Token: "s3cret", Limits: lim,
		Namespaces: map[string]Namespace{"loose": {Sink: "lake", AtLeastOnce: true}}}, h)
	for _, c := range []struct {
		name, path, ctype, key, token, body string
		status                              int
		want                                string
	}{
		{"no token", "events", jsonl, "k", "", `{"a":1}`, 401, "bearer token"},
		{"wrong token", "events", jsonl, "k", "nope", `{"a":1}`, 401, "bearer token"},
		{"bad namespace", "Events", jsonl, "k", "s3cret", `{"a":1}`, 400, "namespace"},
		{"escaping namespace", "..%2Fx", jsonl, "k", "s3cret", `{"a":1}`, 400, "namespace"},
		{"unknown type", "events", "text/plain", "k", "s3cret", `{"a":1}`, 415, "text/plain"},
		{"no key", "events", jsonl, "", "s3cret", `{"a":1}`, 400, "Idempotency-Key"},
		{"long key", "events", jsonl, strings.Repeat("k", 256), "s3cret", `{"a":1}`, 400, "Idempotency-Key"},
		{"bad json", "events", jsonl, "k", "s3cret", "{\"a\":1}\n{oops", 400, "line 2"},
		{"too large", "events", jsonl, "k", "s3cret", strings.Repeat(`{"a":1}`+"\n", 20), 413, "64 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, srv.URL+"/v1/ingest/"+c.path, c.ctype, c.key, c.token, c.body)
			msg, _ := r.body["error"].(string)
			if r.status != c.status || !strings.Contains(msg, c.want) {
				t.Fatalf("answer %d %q, want %d naming %q", r.status, msg, c.status, c.want)
			}
		})
	}
	if len(h.units) != 0 {
		t.Fatalf("refused requests handed %d units to the host", len(h.units))
	}
	// An at-least-once namespace takes a request without a key.
	if r := post(t, srv.URL+"/v1/ingest/loose", jsonl, "", "s3cret", `{"a":1}`); r.status != 200 {
		t.Fatalf("at-least-once without a key: %+v", r)
	}
}

func TestHandlerNamespacesOnly(t *testing.T) {
	srv := newServer(t, Config{Name: "api", Namespaces: map[string]Namespace{"events": {Sink: "lake"}}}, &host{})
	if r := post(t, srv.URL+"/v1/ingest/other", jsonl, "k", "", `{"a":1}`); r.status != http.StatusNotFound {
		t.Fatalf("unlisted namespace answered %+v", r)
	}
}

// The host's refusals map to what a client should do next.
func TestHandlerHostAnswers(t *testing.T) {
	for _, c := range []struct {
		err        error
		status     int
		retryAfter string
	}{
		{fmt.Errorf("%w: full", engine.ErrResourceExhausted), http.StatusTooManyRequests, "1"},
		{engine.ErrNotReady, http.StatusServiceUnavailable, "1"},
		{engine.ErrUnknownOutcome, http.StatusServiceUnavailable, "1"},
		{errors.New("host stopped"), http.StatusServiceUnavailable, "1"},
		{fmt.Errorf("%w: no sink", engine.ErrInvalidUnit), http.StatusBadRequest, ""},
	} {
		srv := newServer(t, Config{Name: "api", DefaultSink: "lake"}, &host{answer: c.err})
		r := post(t, srv.URL+"/v1/ingest/events", jsonl, "k", "", `{"a":1}`)
		if r.status != c.status || r.retryAfter != c.retryAfter {
			t.Errorf("%v: answered %d Retry-After %q, want %d %q", c.err, r.status, r.retryAfter, c.status, c.retryAfter)
		}
	}
}

func TestHandlerNotReady(t *testing.T) {
	h := &host{}
	srv := newServer(t, Config{Name: "api", DefaultSink: "lake", Ready: func() bool { return false }}, h)
	if r := post(t, srv.URL+"/v1/ingest/events", jsonl, "k", "", `{"a":1}`); r.status != 503 || r.retryAfter != "1" {
		t.Fatalf("before recovery: %+v", r)
	}
	if len(h.units) != 0 {
		t.Fatal("a unit reached a host still recovering")
	}
}
