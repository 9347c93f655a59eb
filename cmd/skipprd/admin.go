package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/skipprd/skipprd/storage"
)

// Bounds of the admin listener. A probe or a scrape reads the engine
// through its loop; a loop that busy answers late, and the probe says so
// (503) rather than hang the prober.
const (
	adminQueryWait       = time.Second // one engine query of a probe or a scrape
	adminReadHeaderWait  = 5 * time.Second
	adminShutdownWait    = 5 * time.Second
	adminMetricsInFlight = 4 // concurrent scrapes; more get 503
)

// admin is the admin listener: /metrics, /healthz, /readyz.
type admin struct {
	ln  net.Listener
	srv *http.Server
	log *slog.Logger
}

// listenAdmin binds SKIPPR_ADMIN_ADDR before anything else opens, so a
// port in use fails start-up with nothing to undo. nil when it is off.
func listenAdmin(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", envAdminAddr, addr, err)
	}
	return ln, nil
}

// serveAdmin serves the admin endpoints on ln for d and logs where they
// are.
func serveAdmin(ln net.Listener, d *daemon) *admin {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newEngineCollector(d),
	)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(d.log.Handler(), slog.LevelError),
		MaxRequestsInFlight: adminMetricsInFlight,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok") // the process runs and serves: alive
	})
	mux.HandleFunc("GET /readyz", d.readyz)
	live := &liveView{d: d, started: time.Now()}
	mux.HandleFunc("GET /{$}", live.page)
	mux.HandleFunc("GET /api/live", live.api)
	a := &admin{ln: ln, log: d.log, srv: &http.Server{Handler: mux, ReadHeaderTimeout: adminReadHeaderWait}}
	go func() {
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("admin listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	base := "http://" + ln.Addr().String()
	d.log.Info("admin listening", "addr", ln.Addr().String(), "live_view", base+"/",
		"metrics", base+"/metrics", "healthz", base+"/healthz", "readyz", base+"/readyz")
	return a
}

// close stops the listener, letting scrapes in flight finish briefly.
func (a *admin) close() {
	if a == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminShutdownWait)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		a.log.Warn("admin listener shutdown", "err", err)
	}
}

// readyz answers 200 once recovery has finished and while the engine
// takes units; 503 with the reason otherwise (recovering, shutting down,
// failed closed, or the engine not answering in time).
func (d *daemon) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), adminQueryWait)
	defer cancel()
	h, err := d.host.Health(ctx)
	switch {
	case err != nil:
		http.Error(w, fmt.Sprintf("not ready: the engine did not answer: %v", err), http.StatusServiceUnavailable)
	case h.Failed != nil:
		http.Error(w, fmt.Sprintf("not ready: failed closed (restart to recover): %v", h.Failed), http.StatusServiceUnavailable)
	case !h.Ready:
		msg := "not ready: recovering or shutting down"
		if ts, err := d.host.Troubles(ctx); err == nil && len(ts) > 0 {
			msg += " (failing: " + troubleText(ts) + ")"
		}
		http.Error(w, msg, http.StatusServiceUnavailable)
	default:
		fmt.Fprintln(w, "ready")
	}
}

// s3Stats returns the S3 store's request counts, if the WAL uses one.
func (d *daemon) s3Stats() (storage.S3Stats, bool) {
	if d.s3 == nil {
		return storage.S3Stats{}, false
	}
	return d.s3.Stats(), true
}
