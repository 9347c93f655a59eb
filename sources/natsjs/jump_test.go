package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/brokertest"
	"github.com/skipprd/skipprd/internal/logbuf"
)

// Messages the stream's limits remove while the source runs — past those
// it has pulled, before it pulls them — are a gap too: named before any
// message past it is ingested (on_gap: stop), or logged and counted
// (skip). The first unit's ingest is held until the stream, limited to
// 100 messages, has removed most of 5,000 published meanwhile; the
// consumer then jumps from what it had pulled to what the stream holds.
func TestAGapWhileRunningIsReported(t *testing.T) {
	url := natsURL(t)
	for _, onGap := range []string{OnGapStop, OnGapSkip} {
		t.Run(onGap, func(t *testing.T) {
			js, stream := testStream(t, url, jetstream.StreamConfig{MaxMsgs: 100})
			publish(t, js, stream+".a", 0, 10)
			var logs logbuf.Buffer
			cfg := testConfig(url, stream, &logs)
			cfg.OnGap = onGap
			src, _ := New(cfg)
			h := &testHost{t: t}
			const total = 5010 // ids 0..5009, sequences 1..5010
			err := runPastRemoved(t, js, stream, src, h, func() bool { ids := h.sortedIDs(); return len(ids) > 0 && ids[len(ids)-1] == total-1 })
			ids := h.sortedIDs()
			// The ids recorded are 0..n-1, then (skip) to-1..5009:
			// sequences n+1..to-1 were not recorded.
			n := len(ids)
			for i, id := range ids {
				if id != int64(i) {
					n = i
					break
				}
			}
			if n < 10 || n >= 4910 {
				t.Fatalf("recorded %d ids, contiguous up to sequence %d: want the first 10 and a gap below 4911", len(ids), n)
			}
			if onGap == OnGapStop {
				// Messages pulled with the one past the jump wait with it.
				var gap *GapError
				if !errors.As(err, &gap) || n != len(ids) || gap.From <= uint64(n) || gap.To < 4911 {
					t.Fatalf("Run: %v after %d ids (contiguous to sequence %d); want a gap up to 4911 or past, nothing past it ingested", err, len(ids), n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			from, to := uint64(n)+1, uint64(ids[n])+1 // the gap: from..to-1
			for i, id := range ids[n:] {
				if id != int64(to-1)+int64(i) {
					t.Fatalf("ids past the gap are not contiguous from sequence %d: id %d at %d", to, id, i)
				}
			}
			if st := src.Stats(); st.Gaps != 1 || st.GapMessages != to-from || !strings.Contains(logs.String(), "removed by the stream's limits") {
				t.Errorf("stats %+v: want one gap of sequences %d..%d (%d messages), logged", st, from, to-1, to-from)
			}
		})
	}
}

// A consumer of some subjects jumps over the others' messages at every
// message: that is no gap.
func TestJumpsOverOtherSubjectsAreNoGap(t *testing.T) {
	url := natsURL(t)
	js, stream := testStream(t, url, jetstream.StreamConfig{})
	for i := range 300 {
		publish(t, js, stream+".a", i, 1)
		publish(t, js, stream+".b", 1000+i, 1)
	}
	var logs logbuf.Buffer
	cfg := testConfig(url, stream, &logs)
	cfg.Subjects = []string{stream + ".a"}
	src, _ := New(cfg)
	h := &testHost{t: t}
	if err := runUntil(t, src, h, func() bool { return h.recorded() == 300 }); err != nil {
		t.Fatal(err)
	}
	ids := h.sortedIDs()
	if len(ids) != 300 || ids[0] != 0 || ids[299] != 299 {
		t.Fatalf("recorded %d ids (%v…): want 0..299", len(ids), ids[:min(5, len(ids))])
	}
	if st := src.Stats(); st.Gaps != 0 || st.Retries != 0 {
		t.Errorf("stats %+v: want no gap, no retry", st)
	}
}

// The request that checks a jump fails a few times (the server away for
// a moment): the source retries it, and the gap is still named — never
// let through unchecked, and no stop on a passing failure.
func TestAJumpIsCheckedThroughFailingRequests(t *testing.T) {
	url := natsURL(t)
	js, stream := testStream(t, url, jetstream.StreamConfig{MaxMsgs: 100})
	publish(t, js, stream+".a", 0, 10)
	var logs logbuf.Buffer
	cfg := testConfig(url, stream, &logs)
	cfg.Sleep = func(context.Context, time.Duration) error { return nil }
	src, _ := New(cfg)
	f := &failingStreamInfo{after: 1, fails: 3} // the start's request answers
	src.faults = func(js jetstream.JetStream) jetstream.JetStream { f.JetStream = js; return f }
	h := &testHost{t: t}
	err := runPastRemoved(t, js, stream, src, h, func() bool { return false })
	var gap *GapError
	if !errors.As(err, &gap) || gap.To < 4911 {
		t.Fatalf("Run: %v; want the gap up to sequence 4911 or past", err)
	}
	if st := src.Stats(); st.Retries != 3 || !strings.Contains(logs.String(), "cannot read the stream's first sequence") {
		t.Errorf("stats %+v, %d requests failed: want the 3 failed requests retried and logged", st, f.failed)
	}
}

// failingStreamInfo fails stream info requests after the first `after`,
// `fails` times, with the error a client gets while its server is away.
type failingStreamInfo struct {
	jetstream.JetStream
	mu                   sync.Mutex
	calls, after, failed int
	fails                int
}

func (f *failingStreamInfo) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	f.mu.Lock()
	f.calls++
	fail := f.calls > f.after && f.failed < f.fails
	if fail {
		f.failed++
	}
	f.mu.Unlock()
	if fail {
		return nil, nats.ErrConnectionReconnecting
	}
	return f.JetStream.Stream(ctx, name)
}

// runPastRemoved runs src on a stream holding 10 messages (ids 0..9),
// limited to 100, until cond holds: its first unit's ingest is held
// while 5,000 more (ids 10..5009) are published, of which the stream
// removes all but the last 100 — some before the consumer pulls them.
// It returns what the run returned.
func runPastRemoved(t *testing.T, js jetstream.JetStream, stream string, src *Source, h *testHost, cond func() bool) error {
	t.Helper()
	held, release := make(chan struct{}), make(chan struct{})
	var hold sync.Once
	ingest := func(ctx context.Context, u engine.Unit) error {
		hold.Do(func() { close(held); <-release })
		return h.ingest(ctx, u)
	}
	done := make(chan error, 1)
	go func() {
		done <- brokertest.RunUntil(t, func(ctx context.Context) error { return src.Run(ctx, ingest, nil) }, cond,
			func() string { return fmt.Sprintf("%d rows recorded", h.recorded()) })
	}()
	<-held
	publish(t, js, stream+".a", 10, 5000) // the stream keeps sequences 4911..5010
	close(release)
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute): // RunUntil's own failure does not reach done
		t.Fatal("the source's run did not end within a minute")
		return nil
	}
}
