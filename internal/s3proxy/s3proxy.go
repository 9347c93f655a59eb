package s3proxy

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Mode is how the proxy answers.
type Mode int32

const (
	Pass        Mode = iota // every request reaches the store
	RefuseWrite             // PUT, POST and DELETE: 403 AccessDenied
	FailWrite               // PUT, POST and DELETE: 500 InternalError
	Cut                     // every request: the connection is cut once it arrived, no answer
)

func (m Mode) String() string {
	return [...]string{"pass", "refuse-writes", "fail-writes", "cut"}[m]
}

// Proxy is a running endpoint.
type Proxy struct {
	URL     string
	mode    atomic.Int32
	handler http.Handler
	mu      sync.Mutex
	srv     *http.Server // nil while stopped
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
	p.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.answer(w, r) {
			return
		}
		rp.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.URL = "http://" + ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Stop)
	return p
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.srv = &http.Server{Handler: p.handler, ReadHeaderTimeout: 10 * time.Second}
	go func(srv *http.Server) { _ = srv.Serve(ln) }(p.srv)
}

// Stop closes the listener and every connection: the store is down, and
// a client's connections are refused until Resume.
func (p *Proxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil {
		_ = p.srv.Close()
		p.srv = nil
	}
}

// Resume listens on the same address again.
func (p *Proxy) Resume(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatalf("s3proxy: listen again on %s: %v", p.URL, err)
	}
	p.serve(ln)
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
	case Cut:
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
