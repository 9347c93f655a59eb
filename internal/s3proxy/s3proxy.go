// Package s3proxy is an S3 endpoint for tests of how skipprd behaves
// when its store misbehaves: a real gofakes3 store (in memory) behind a
// reverse proxy whose mode a test switches — pass every request, refuse
// writes with 403 AccessDenied (credentials that lost write access),
// answer writes 500 (a store that fails them), or be down (every
// connection cut). Test support only; the daemon reaches it through the
// standard AWS variables like any S3-compatible store.
package s3proxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Mode is how the proxy answers.
type Mode int32

const (
	Pass        Mode = iota // every request reaches the store
	RefuseWrite             // PUT, POST and DELETE: 403 AccessDenied
	FailWrite               // PUT, POST and DELETE: 500 InternalError
	Down                    // every request: the connection is cut, no answer
)

func (m Mode) String() string {
	return [...]string{"pass", "refuse-writes", "fail-writes", "down"}[m]
}

// Proxy is a running endpoint.
type Proxy struct {
	URL  string
	mode atomic.Int32
	// Refused counts the requests answered other than by the store.
	Refused atomic.Int64
}

// Start serves a store holding bucket, passing every request, until t
// ends.
func Start(t testing.TB, bucket string) *Proxy {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	store := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(store.Close)
	target, _ := url.Parse(store.URL)
	p := &Proxy{}
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.answer(w, r) {
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Set switches the mode.
func (p *Proxy) Set(m Mode) { p.mode.Store(int32(m)) }

// answer answers r itself when the mode says so.
func (p *Proxy) answer(w http.ResponseWriter, r *http.Request) bool {
	write := r.Method == http.MethodPut || r.Method == http.MethodPost || r.Method == http.MethodDelete
	switch Mode(p.mode.Load()) {
	case RefuseWrite:
		if write {
			p.Refused.Add(1)
			s3Error(w, http.StatusForbidden, "AccessDenied", "Access Denied")
			return true
		}
	case FailWrite:
		if write {
			p.Refused.Add(1)
			s3Error(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
			return true
		}
	case Down:
		p.Refused.Add(1)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return true
			}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	}
	return false
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, msg)
}
