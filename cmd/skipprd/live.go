package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/storage"
)

// The live WAL view: one page (web/live.html, embedded: no asset is
// fetched from anywhere else) that polls /api/live twice a second and
// draws the segment tape, each live segment's completion bitmap, ACK
// delay against the persist EMA and the adaptive delay's bounds, the
// memory pool and the alert feed.

//go:embed web/live.html
var livePage []byte

// liveReclaimedMax bounds the reclaimed segments the tape keeps showing.
const liveReclaimedMax = 24

// liveState is what one poll of the page gets.
type liveState struct {
	UptimeS      float64           `json:"uptime_s"`
	AckedRows    uint64            `json:"acked_rows"`
	AppliedRows  uint64            `json:"applied_rows"`
	Segments     []liveSegment     `json:"segments"`
	Reclaimed    []string          `json:"reclaimed"` // newest last
	AckDelayMs   float64           `json:"ack_delay_ms"`
	PersistEMAMs float64           `json:"persist_ema_ms"`
	FlushDelayMs float64           `json:"flush_delay_ms"`
	DelayLowerMs float64           `json:"delay_lower_ms"`
	DelayUpperMs float64           `json:"delay_upper_ms"`
	Memory       liveMemory        `json:"memory"`
	Alerts       []liveAlert       `json:"alerts"`     // newest last
	Namespaces   map[string]uint64 `json:"namespaces"` // rows acked
	Waiting      []liveWaiting     `json:"waiting"`    // lanes' open jobs
}

// liveWaiting is a lane's job waiting for its cut.
type liveWaiting struct {
	Sink      string  `json:"sink"`
	Namespace string  `json:"ns"`
	Bytes     int64   `json:"bytes"`
	Segments  int     `json:"segments"`
	WaitedS   float64 `json:"waited_s"`
}

type liveSegment struct {
	ID    string     `json:"id"`
	State string     `json:"state"` // committed | applying | reclaiming | kept
	Parts []livePart `json:"parts"`
}

type livePart struct {
	Namespace string `json:"ns"`
	Bytes     int64  `json:"bytes"`
	Rows      int64  `json:"rows"`
	Applied   bool   `json:"applied"`
}

type liveMemory struct {
	Pool           int64 `json:"pool"`
	AdmissionLimit int64 `json:"admission_limit"`
	Held           int64 `json:"held"`
	CacheLimit     int64 `json:"cache_limit"`
	Cached         int64 `json:"cached"`
	Pinned         int64 `json:"pinned"` // of Cached, bodies running jobs read
}

type liveAlert struct {
	Seq    uint64 `json:"seq"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// liveView remembers the segments the last poll saw, so a segment that
// disappears is shown as reclaimed.
type liveView struct {
	d         *daemon
	started   time.Time
	mu        sync.Mutex
	seen      []string
	reclaimed []string
}

func (v *liveView) page(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(livePage)
}

func (v *liveView) api(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), adminQueryWait)
	defer cancel()
	s, err := v.read(ctx)
	if err != nil {
		http.Error(w, "the engine did not answer: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(s)
}

// read gathers one liveState from the host.
func (v *liveView) read(ctx context.Context) (liveState, error) {
	h := v.d.host
	var in liveInputs
	var err error
	if in.tape, err = h.Tape(ctx); err != nil {
		return liveState{}, err
	}
	if in.stats, err = h.Stats(ctx); err != nil {
		return liveState{}, err
	}
	if in.delay, err = h.FlushDelay(ctx); err != nil {
		return liveState{}, err
	}
	if in.alerts, _, err = h.AlertsSince(ctx, 0); err != nil {
		return liveState{}, err
	}
	in.uptime = time.Since(v.started)
	in.reclaimed = v.reclaim(in.tape)
	return buildLive(in), nil
}

// liveInputs is what one poll read from the host.
type liveInputs struct {
	uptime    time.Duration
	tape      []engine.TapeSegment
	stats     engine.Stats
	delay     storage.FlushDelay
	alerts    []engine.Alert
	reclaimed []string
}

// liveAlertsMax bounds the alerts one poll carries (the newest).
const liveAlertsMax = 20

// buildLive is the answer for in. Every list and map in it is non-nil,
// whatever in holds — the page iterates them, and an idle pipeline has
// none of anything (TestLiveNeverNull).
func buildLive(in liveInputs) liveState {
	st, fd := in.stats, in.delay
	s := liveState{
		UptimeS: in.uptime.Seconds(), AckDelayMs: millis(st.AckDelayEMA), PersistEMAMs: millis(st.PersistEMA),
		FlushDelayMs: millis(fd.Now), DelayLowerMs: millis(fd.Lower), DelayUpperMs: millis(fd.Upper),
		Memory: liveMemory{Pool: st.PoolBytes, AdmissionLimit: st.AdmissionBytes, Held: st.HeldBytes,
			CacheLimit: st.CacheBytesMax, Cached: st.CacheBytes, Pinned: st.CachePinnedBytes},
		AckedRows: st.RowsAcked, AppliedRows: st.RowsApplied,
		Segments:   liveSegments(in.tape),
		Reclaimed:  append(make([]string, 0, len(in.reclaimed)), in.reclaimed...),
		Alerts:     make([]liveAlert, 0, min(len(in.alerts), liveAlertsMax)),
		Namespaces: make(map[string]uint64, len(st.Namespaces)),
		Waiting:    make([]liveWaiting, 0, len(st.OpenJobs)),
	}
	for _, j := range st.OpenJobs {
		s.Waiting = append(s.Waiting, liveWaiting{j.SinkRef, j.Namespace, j.Bytes, j.Segments, j.Waited.Seconds()})
	}
	for _, ns := range st.Namespaces {
		s.Namespaces[ns.Namespace] = ns.RowsAcked
	}
	for _, a := range in.alerts[max(0, len(in.alerts)-liveAlertsMax):] {
		s.Alerts = append(s.Alerts, liveAlert{a.Seq, a.Kind.String(), alertReason(a.Err)})
	}
	return s
}

// alertReason is an alert's reason as text. The engine gives every
// alert one (engine.Alert.Err); an alert without one is shown as the
// engine bug it is rather than failing the whole answer.
func alertReason(err error) string {
	if err == nil {
		return "(no reason: the engine raised an alert without one, a bug)"
	}
	return err.Error()
}

func liveSegments(tape []engine.TapeSegment) []liveSegment {
	out := make([]liveSegment, 0, len(tape))
	for _, t := range tape {
		seg := liveSegment{ID: t.ID, State: "committed", Parts: make([]livePart, 0, len(t.Parts))}
		switch {
		case t.Kept:
			seg.State = "kept"
		case t.Reclaiming:
			seg.State = "reclaiming"
		case t.Applied > 0:
			seg.State = "applying"
		}
		for _, p := range t.Parts {
			seg.Parts = append(seg.Parts, livePart{p.Namespace, p.Bytes, p.Rows, p.Applied})
		}
		out = append(out, seg)
	}
	return out
}

// reclaim notes the segments gone since the last poll and returns the
// most recent ones, in commit order.
func (v *liveView) reclaim(tape []engine.TapeSegment) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := make([]string, len(tape))
	for i, t := range tape {
		now[i] = t.ID
	}
	for _, id := range v.seen {
		if !slices.Contains(now, id) {
			v.reclaimed = append(v.reclaimed, id)
		}
	}
	slices.Sort(v.reclaimed) // snapshot ids sort in commit order; reclaims come in any
	v.reclaimed = v.reclaimed[max(0, len(v.reclaimed)-liveReclaimedMax):]
	v.seen = now
	return slices.Clone(v.reclaimed)
}

// millis is d in milliseconds, for JSON.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
