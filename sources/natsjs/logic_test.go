package natsjs

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources/messages"
)

func logicSource(t *testing.T, onGap string) *Source {
	t.Helper()
	s, err := New(Config{Name: "orders", SinkRef: "lake", URL: "nats://127.0.0.1:1", Stream: "S", OnGap: onGap,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestResumeAgainstTheStream: a sequence inside the stream (or its next)
// is kept; one below its first is a gap naming the range — the error
// with on_gap stop, the first (counted) with skip; one past last + 1
// stops the source.
func TestResumeAgainstTheStream(t *testing.T) {
	for _, c := range []struct {
		onGap             string
		next, first, last uint64
		at                uint64
		gap, stop, ahead  bool
		gaps, gapMessages uint64
	}{
		{onGap: OnGapStop, next: 5, first: 1, last: 9, at: 5},
		{onGap: OnGapStop, next: 10, first: 1, last: 9, at: 10},
		{onGap: OnGapStop, next: 3, first: 7, last: 9, gap: true, stop: true},
		{onGap: OnGapSkip, next: 3, first: 7, last: 9, at: 7, gap: true, gaps: 1, gapMessages: 4},
		{onGap: OnGapSkip, next: 11, first: 1, last: 9, stop: true, ahead: true},
	} {
		t.Run(fmt.Sprintf("%s/%d-in-%d..%d", c.onGap, c.next, c.first, c.last), func(t *testing.T) {
			s := logicSource(t, c.onGap)
			at, gap, err := s.Resume(c.next, c.first, c.last)
			if (err != nil) != c.stop || (gap != nil) != c.gap {
				t.Fatalf("Resume = %d, gap %v, err %v; want stop %v, gap %v", at, gap, err, c.stop, c.gap)
			}
			if _, ok := errors.AsType[*AheadError](err); ok != c.ahead {
				t.Fatalf("err %v: an *AheadError is %v, want %v", err, ok, c.ahead)
			}
			if gap != nil && (gap.From != c.next || gap.To != c.first) {
				t.Fatalf("gap %+v, want %d..%d", gap, c.next, c.first)
			}
			if !c.stop && at != c.at {
				t.Fatalf("at = %d, want %d", at, c.at)
			}
			if st := s.Stats(); st.Gaps != c.gaps || st.GapMessages != c.gapMessages {
				t.Fatalf("stats gaps %d messages %d, want %d %d", st.Gaps, st.GapMessages, c.gaps, c.gapMessages)
			}
		})
	}
}

// TestUnitHalvesToABadMessage: the messages before one that cannot be a
// row make a unit of their own, its offset the sequence after its last;
// the bad one, once first, is named.
func TestUnitHalvesToABadMessage(t *testing.T) {
	s := logicSource(t, OnGapStop)
	var msgs []Message
	for i := range 8 {
		v := fmt.Appendf(nil, `{"n":%d}`, i)
		if i == 5 {
			v = []byte(`[5]`)
		}
		msgs = append(msgs, Message{Seq: uint64(20 + i), Subject: "S.a", At: 1, Value: v})
	}
	u, n, err := s.Unit(msgs)
	if err != nil {
		t.Fatal(err)
	}
	messages.ReleaseAll(u.Batches)
	if n != 4 {
		t.Fatalf("the unit holds %d messages, want 4 (halved once past the bad one)", n)
	}
	if want := (segment.Offsets{{Key: s.OffsetKey(), Value: 24}}); fmt.Sprint(u.Offsets) != fmt.Sprint(want) {
		t.Fatalf("offsets %v, want %v", u.Offsets, want)
	}
	u, n, err = s.Unit(msgs[4:])
	if err != nil || n != 1 {
		t.Fatalf("from sequence 24: %d messages, %v; want the good one alone", n, err)
	}
	messages.ReleaseAll(u.Batches)
	_, _, err = s.Unit(msgs[5:])
	if me, ok := errors.AsType[*MessageError](err); !ok || me.Sequence != 25 {
		t.Fatalf("from sequence 25: %v; want a *MessageError naming 25", err)
	}
}
