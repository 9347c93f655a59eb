package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources/generator"
	httpsrc "github.com/skipprd/skipprd/sources/http"
	"github.com/skipprd/skipprd/sources/objects"
	"github.com/skipprd/skipprd/sources/postgrescdc"
	"github.com/skipprd/skipprd/storage"
)

// httpShutdownWait bounds a graceful stop of an HTTP source: requests in
// flight are answered when the host commits what it holds, well within it.
// The server's own timeouts bound what a slow or idle client holds: a
// header within 10 s, a whole request (up to the body cap) within 5
// minutes, an idle keep-alive connection for 2 minutes.
const (
	httpShutdownWait  = 30 * time.Second
	httpHeaderTimeout = 10 * time.Second
	httpReadTimeout   = 5 * time.Minute
	httpIdleTimeout   = 2 * time.Minute
)

// source is one running source of the pipeline file.
type source interface {
	// run feeds the host until ctx ends or the source fails; nil after
	// a stop asked by ctx.
	run(ctx context.Context, host *storage.Host, offsets segment.Offsets) error
	// stats: rows handed to the host, and rows acked.
	stats() (ingested, acked uint64)
	describe() []any // log attributes
}

// genSource is the built-in generator.
type genSource struct {
	name string
	gen  *generator.Generator
}

func (g *genSource) run(ctx context.Context, host *storage.Host, offsets segment.Offsets) error {
	return g.gen.Run(ctx, host.Ingest, offsets)
}

func (g *genSource) stats() (uint64, uint64) {
	st := g.gen.Stats()
	return st.RowsIngested, st.RowsAcked
}

func (g *genSource) describe() []any { return []any{"source", g.name, "kind", sourceGenerator} }

// httpSource is an HTTP ingest endpoint. It listens from start-up on —
// answering 503 until recovery has finished — so a client sees a daemon
// that is starting, not a refused connection.
type httpSource struct {
	name     string
	ln       net.Listener
	srv      *http.Server
	ready    atomic.Bool
	ingested atomic.Uint64
	acked    atomic.Uint64
}

// newHTTPSource binds the source's address; the host is set by run.
func newHTTPSource(spec sourceSpec, getenv func(string) string, log *slog.Logger, host func() *storage.Host) (*httpSource, error) {
	h := spec.HTTP
	var token string
	if h.TokenEnv != "" {
		if token = getenv(h.TokenEnv); token == "" {
			return nil, &configError{Var: h.TokenEnv, Want: fmt.Sprintf("is empty, but source %q takes its bearer token from it", spec.Name)}
		}
	}
	s := &httpSource{name: spec.Name}
	lim := httpsrc.DefaultLimits()
	lim.BodyBytes = h.BodyMaxBytes
	cfg := httpsrc.Config{Name: spec.Name, Token: token, Limits: lim, Logger: log, Ready: s.ready.Load}
	if h.Namespaces == nil {
		cfg.DefaultSink = spec.Sink
	} else {
		cfg.Namespaces = map[string]httpsrc.Namespace{}
		for _, ns := range h.Namespaces {
			cfg.Namespaces[ns.Name] = httpsrc.Namespace{Sink: ns.Sink, AtLeastOnce: ns.AtLeastOnce}
		}
	}
	handler, err := httpsrc.New(cfg, func(ctx context.Context, u engine.Unit) error {
		var rows uint64
		for _, b := range u.Batches {
			rows += uint64(b.NumRows())
		}
		s.ingested.Add(rows)
		err := host().Ingest(ctx, u)
		if err == nil {
			s.acked.Add(rows)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", h.Listen)
	if err != nil {
		return nil, fmt.Errorf("source %q: listen on %s: %w", spec.Name, h.Listen, err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: handler, ReadHeaderTimeout: httpHeaderTimeout, ReadTimeout: httpReadTimeout,
		IdleTimeout: httpIdleTimeout, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// run marks the source ready and waits for ctx; then it stops taking
// requests and waits for those in flight, which the host's close answers.
func (s *httpSource) run(ctx context.Context, _ *storage.Host, _ segment.Offsets) error {
	s.ready.Store(true)
	<-ctx.Done()
	return s.shutdown()
}

func (s *httpSource) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), httpShutdownWait)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("source %q: shutdown: %w", s.name, err)
	}
	return nil
}

func (s *httpSource) stats() (uint64, uint64) { return s.ingested.Load(), s.acked.Load() }

func (s *httpSource) describe() []any {
	return []any{"source", s.name, "kind", sourceHTTP, "listen", s.ln.Addr().String()}
}

// closeListener releases the address of a source that never ran.
func (s *httpSource) closeListener() { _ = s.srv.Close() }

// objectsSource ingests every object under a directory or an S3 prefix.
type objectsSource struct {
	name, kind, where string
	src               *objects.Source
}

func (o *objectsSource) run(ctx context.Context, host *storage.Host, offsets segment.Offsets) error {
	return o.src.Run(ctx, host.Ingest, offsets)
}

func (o *objectsSource) stats() (uint64, uint64) {
	st := o.src.Stats()
	return st.RowsIngested, st.RowsAcked
}

func (o *objectsSource) describe() []any {
	return []any{"source", o.name, "kind", o.kind, "from", o.where}
}

// pgcdcSource streams a Postgres database's changes (its snapshot first).
type pgcdcSource struct {
	name string
	spec *pgcdcSourceSpec
	src  *postgrescdc.Source
}

func (p *pgcdcSource) run(ctx context.Context, host *storage.Host, offsets segment.Offsets) error {
	return p.src.Run(ctx, host.Ingest, offsets)
}

// stats counts rows acked (snapshot rows and changes); the source hands
// the host nothing it does not wait for.
func (p *pgcdcSource) stats() (uint64, uint64) {
	st := p.src.Stats()
	n := st.SnapshotRows + st.Changes
	return n, n
}

func (p *pgcdcSource) describe() []any {
	return []any{"source", p.name, "kind", sourcePGCDC, "url_env", p.spec.URLEnv, "publication", p.spec.Publication,
		"slot", p.spec.Slot, "tables", p.spec.Tables}
}
