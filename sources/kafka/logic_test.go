package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources/messages"
)

func logicSource(t *testing.T, onGap string) *Source {
	t.Helper()
	s, err := New(Config{Name: "orders", SinkRef: "lake", Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, OnGap: onGap,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestResumeAgainstTheLog: a position inside the log is kept; one below
// its start is a gap naming the range — the error with on_gap stop, the
// start (counted) with skip; one past its end stops the source.
func TestResumeAgainstTheLog(t *testing.T) {
	for _, c := range []struct {
		onGap            string
		at, start, end   int64
		next             int64
		gap              bool
		stop, ahead      bool
		gaps, gapRecords uint64
	}{
		{onGap: OnGapStop, at: 5, start: 0, end: 9, next: 5},
		{onGap: OnGapStop, at: 9, start: 9, end: 9, next: 9},
		{onGap: OnGapStop, at: 3, start: 7, end: 9, gap: true, stop: true},
		{onGap: OnGapSkip, at: 3, start: 7, end: 9, next: 7, gap: true, gaps: 1, gapRecords: 4},
		{onGap: OnGapSkip, at: 10, start: 0, end: 9, stop: true, ahead: true},
	} {
		t.Run(fmt.Sprintf("%s/%d-in-%d..%d", c.onGap, c.at, c.start, c.end), func(t *testing.T) {
			s := logicSource(t, c.onGap)
			next, gap, err := s.Resume("t", 2, c.at, c.start, c.end)
			if (err != nil) != c.stop || (gap != nil) != c.gap {
				t.Fatalf("Resume = %d, gap %v, err %v; want stop %v, gap %v", next, gap, err, c.stop, c.gap)
			}
			if _, ok := errors.AsType[*AheadError](err); ok != c.ahead {
				t.Fatalf("err %v: an *AheadError is %v, want %v", err, ok, c.ahead)
			}
			if gap != nil && (gap.From != c.at || gap.To != c.start || gap.Partition != 2) {
				t.Fatalf("gap %+v, want partition 2 offsets %d..%d", gap, c.at, c.start)
			}
			if !c.stop && next != c.next {
				t.Fatalf("next = %d, want %d", next, c.next)
			}
			if st := s.Stats(); st.Gaps != c.gaps || st.GapRecords != c.gapRecords {
				t.Fatalf("stats gaps %d records %d, want %d %d", st.Gaps, st.GapRecords, c.gaps, c.gapRecords)
			}
		})
	}
}

// TestUnitHalvesToFit: records that decode to more than the limits
// together make a unit of their first half (then quarter…), whose
// offset is the one after its last record, never after a record it
// does not hold.
func TestUnitHalvesToFit(t *testing.T) {
	s := logicSource(t, OnGapStop)
	s.cfg.Limits.Rows = 3
	var recs []*kgo.Record
	for i := range 8 {
		recs = append(recs, &kgo.Record{Topic: "t", Partition: 1, Offset: int64(40 + i), Value: fmt.Appendf(nil, `{"n":%d}`, i), Timestamp: time.Unix(1, 0)})
	}
	u, n, err := s.Unit("t", recs)
	if err != nil {
		t.Fatal(err)
	}
	defer messages.ReleaseAll(u.Batches)
	if n != 2 {
		t.Fatalf("the unit holds %d records, want 2 (8 halved until at most 3 rows)", n)
	}
	want := segment.Offsets{{Key: s.OffsetKey("t", 1), Value: 42}}
	if fmt.Sprint(u.Offsets) != fmt.Sprint(want) {
		t.Fatalf("offsets %v, want %v", u.Offsets, want)
	}
	if at, ok := s.Recovered(want, "t", 1); !ok || at != 42 {
		t.Fatalf("Recovered = %d, %v; want 42", at, ok)
	}
	if _, ok := s.Recovered(want, "t", 0); ok {
		t.Fatal("Recovered found partition 0, which the view does not hold")
	}
}
