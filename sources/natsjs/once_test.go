package natsjs

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skipprd/skipprd/internal/logbuf"
)

// runOnce runs a once source on the host's offsets until Run returns on
// its own (runUntil fails the test after 30 s), and returns the source.
func runOnce(t *testing.T, cfg Config, h *testHost) *Source {
	t.Helper()
	cfg.Once = true
	src, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntil(t, src, h, func() bool { return false }); err != nil {
		t.Fatalf("once Run: %v", err)
	}
	return src
}

// A once Run ingests the stream up to its last message at start — with
// a subjects filter whose last match is not the stream's last message —
// and returns; a second once Run takes exactly the messages published
// since, a third (nothing new) none, and a Run on a stream with nothing
// of its subjects returns at once.
func TestOnceIngestsUpToTheLastSequenceAtStart(t *testing.T) {
	url := natsURL(t)
	js, stream := testStream(t, url, jetstream.StreamConfig{})
	publish(t, js, stream+".orders", 0, 300)
	publish(t, js, stream+".noise", 0, 20) // the stream's last messages: filtered out
	var logs logbuf.Buffer
	cfg := testConfig(url, stream, &logs)
	cfg.Subjects = []string{stream + ".orders"}
	h := &testHost{t: t}
	runOnce(t, cfg, h)
	wantIDs(t, h, 300)
	publish(t, js, stream+".orders", 300, 120)
	publish(t, js, stream+".noise", 20, 5)
	second := runOnce(t, cfg, h)
	wantIDs(t, h, 420)
	if st := second.Stats(); st.MessagesAcked != 120 {
		t.Errorf("second once run: stats %+v; want the 120 messages published since", st)
	}
	if st := runOnce(t, cfg, h).Stats(); st.MessagesAcked != 0 {
		t.Errorf("a once run with nothing new: stats %+v; want nothing", st)
	}
	other := testConfig(url, stream, &logs)
	other.Name, other.Subjects = "quiet", []string{stream + ".none"}
	if st := runOnce(t, other, &testHost{t: t}).Stats(); st.UnitsAcked != 0 {
		t.Errorf("a once run over no message of its subjects: stats %+v", st)
	}
}

// Messages published while a once Run ingests do not keep it running:
// it ends once the messages up to the mark are acked, and what it acked
// past the mark a next Run does not take again.
func TestOnceEndsWhilePublishersGoOn(t *testing.T) {
	url := natsURL(t)
	js, stream := testStream(t, url, jetstream.StreamConfig{})
	publish(t, js, stream+".a", 0, 500)
	ctx, cancel := context.WithCancel(context.Background())
	published := make(chan int, 1)
	go func() {
		n := 500
		defer func() { published <- n }()
		for ; ctx.Err() == nil; n++ {
			if _, err := js.Publish(ctx, stream+".a", fmt.Appendf(nil, `{"id": %d}`, n)); err != nil {
				return
			}
		}
	}()
	var logs logbuf.Buffer
	h := &testHost{t: t}
	runOnce(t, testConfig(url, stream, &logs), h)
	cancel()
	n := <-published
	if got := h.recorded(); got < 500 {
		t.Fatalf("the once run recorded %d messages; want at least the 500 at start", got)
	}
	runOnce(t, testConfig(url, stream, &logs), h)
	if ids := h.sortedIDs(); len(ids) < n-1 || ids[0] != 0 || ids[len(ids)-1] != int64(len(ids)-1) {
		t.Fatalf("after two once runs %d ids (last %v); want 0..%d at least, each once", len(ids), ids[len(ids)-1:], n-2)
	}
}
