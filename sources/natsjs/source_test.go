package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skipprd/skipprd/internal/logbuf"
)

func wantIDs(t *testing.T, h *testHost, n int) {
	t.Helper()
	ids := h.sortedIDs()
	if len(ids) != n || n > 0 && (ids[0] != 0 || ids[n-1] != int64(n-1)) {
		t.Fatalf("%d ids recorded (%v…), want 0..%d once each", len(ids), ids[:min(len(ids), 5)], n-1)
	}
}

// A crash — units committed but never acked — and a restart from the
// host's recovered sequence: every message once, only the filtered ones.
func TestRestartFromTheRecoveredSequenceIngestsEachMessageOnce(t *testing.T) {
	url := natsURL(t)
	js, stream := testStream(t, url, jetstream.StreamConfig{})
	publish(t, js, stream+".orders", 0, 1000)
	publish(t, js, stream+".noise", 0, 50)
	var logs logbuf.Buffer
	cfg := testConfig(url, stream, &logs)
	cfg.Subjects = []string{stream + ".orders"}
	h := &testHost{t: t, afterCommit: func(n int) error {
		if n >= 4 {
			return errors.New("the daemon was killed")
		}
		return nil
	}}
	src, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = runUntil(t, src, h, func() bool { return h.recorded() >= 100 })
	first := h.recorded()
	h.afterCommit = nil
	publish(t, js, stream+".orders", 1000, 500)
	src2, _ := New(cfg)
	if err := runUntil(t, src2, h, func() bool { return h.recorded() >= 1500 }); err != nil {
		t.Fatal(err)
	}
	if first >= 1500 {
		t.Fatalf("the first run recorded %d rows; the test wants a restart in the middle", first)
	}
	wantIDs(t, h, 1500)
}

// Messages the stream's limits removed before they were ingested stop
// the source naming the range — or, with on_gap: skip, are logged and
// counted.
func TestStreamLimitsGapIsReportedNeverSkippedSilently(t *testing.T) {
	url := natsURL(t)
	for _, onGap := range []string{OnGapStop, OnGapSkip} {
		t.Run(onGap, func(t *testing.T) {
			js, stream := testStream(t, url, jetstream.StreamConfig{MaxMsgs: 100})
			publish(t, js, stream+".a", 0, 50)
			var logs logbuf.Buffer
			cfg := testConfig(url, stream, &logs)
			h := &testHost{t: t}
			src, _ := New(cfg)
			if err := runUntil(t, src, h, func() bool { return h.recorded() == 50 }); err != nil {
				t.Fatal(err)
			}
			publish(t, js, stream+".a", 50, 200) // the stream keeps sequences 151..250
			cfg.OnGap = onGap
			src2, _ := New(cfg)
			err := runUntil(t, src2, h, func() bool { return h.recorded() == 150 })
			if onGap == OnGapStop {
				var gap *GapError
				if !errors.As(err, &gap) || gap.From != 51 || gap.To != 151 || !strings.Contains(err.Error(), "sequences 51..150") {
					t.Fatalf("Run: %v; want a gap of sequences 51..150", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st := src2.Stats(); st.Gaps != 1 || st.GapMessages != 100 || !strings.Contains(logs.String(), "removed by the stream's limits") {
				t.Errorf("stats %+v: want one gap of 100 messages, logged", st)
			}
		})
	}
}

func TestAMessageThatIsNotJSONStopsTheSourceNamingIt(t *testing.T) {
	url := natsURL(t)
	js, stream := testStream(t, url, jetstream.StreamConfig{})
	publish(t, js, stream+".a", 0, 10)
	if _, err := js.Publish(context.Background(), stream+".a", []byte(`{"id": 10, `)); err != nil {
		t.Fatal(err)
	}
	var logs logbuf.Buffer
	h := &testHost{t: t}
	src, _ := New(testConfig(url, stream, &logs))
	err := runUntil(t, src, h, func() bool { return false })
	var me *MessageError
	if !errors.As(err, &me) || me.Sequence != 11 || !strings.Contains(err.Error(), fmt.Sprintf("stream %q sequence 11", stream)) {
		t.Fatalf("Run: %v; want the message at sequence 11 named", err)
	}
}

func TestARecoveredSequenceBeyondTheStreamStops(t *testing.T) {
	url := natsURL(t)
	js, stream := testStream(t, url, jetstream.StreamConfig{})
	publish(t, js, stream+".a", 0, 5)
	var logs logbuf.Buffer
	src, _ := New(testConfig(url, stream, &logs))
	h := &testHost{t: t}
	h.committed = h.committed.Advance(src.OffsetKey(), 900)
	err := runUntil(t, src, h, func() bool { return false })
	var ahead *AheadError
	if !errors.As(err, &ahead) || ahead.Resume != 900 || ahead.Last != 5 {
		t.Fatalf("Run: %v; want the stream ending at 5 before the recovered 900", err)
	}
}
