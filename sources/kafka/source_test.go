package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/logbuf"
)

// wantAll checks that every offset below n of each partition was
// recorded once (n: the partition's end offset) and nothing else.
func wantAll(t *testing.T, h *testHost, topic string, ends map[int32]int64) {
	t.Helper()
	got := h.offsetsOf()
	for p, end := range ends {
		offs := got[tp{topic, p}]
		if int64(len(offs)) != end || end > 0 && (offs[0] != 0 || offs[len(offs)-1] != end-1) {
			t.Errorf("partition %d: %d rows recorded (offsets %v…), want offsets 0..%d once each", p, len(offs), head(offs), end-1)
		}
	}
}

func head(s []int64) []int64 { return s[:min(len(s), 5)] }

func endOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

func TestReadsEveryRecordOnceWithItsColumns(t *testing.T) {
	c := cluster(t, 3, "orders.v1", 4)
	produce(t, c, "orders.v1", 0, 2000, func(id int) []byte {
		if id == 7 {
			return nil // a tombstone: a row of the metadata columns alone
		}
		return fmt.Appendf(nil, "{\n  \"id\": %d,\n  \"name\": \"record %d\"\n}", id, id) // pretty-printed
	})
	var logs logbuf.Buffer
	src, err := New(testConfig(c, "orders.v1", &logs))
	if err != nil {
		t.Fatal(err)
	}
	h := newHost(t)
	var schemas []string
	h.onUnit = func(n int, u engine.Unit) error {
		if u.Key.Namespace != "orders_v1" {
			t.Errorf("namespace %q, want orders_v1 (the topic's name)", u.Key.Namespace)
		}
		schemas = append(schemas, u.Schema.String())
		return nil
	}
	if err := runUntil(t, src, h, func() bool { return h.recorded() == 2000 }); err != nil {
		t.Fatal(err)
	}
	wantAll(t, h, "orders.v1", endOffsets(t, admin(t, c), "orders.v1"))
	ids := slices.Clone(h.ids)
	slices.Sort(ids)
	if len(ids) != 2000 || ids[0] != 0 || ids[len(ids)-1] != 1999 {
		t.Errorf("ids: %d of them, %v…", len(ids), head(ids))
	}
	st := src.Stats()
	if st.RecordsAcked != 2000 || st.UnitsAcked < 10 {
		t.Errorf("stats %+v: want 2000 records acked in many small units", st)
	}
	if len(st.Lag) != 4 {
		t.Errorf("lag of %d partitions, want 4: %+v", len(st.Lag), st.Lag)
	}
	for _, l := range st.Lag {
		if l.Records != 0 || l.Topic != "orders.v1" {
			t.Errorf("lag %+v: want 0 once every record is acked", l)
		}
	}
	for _, s := range schemas {
		for _, col := range []string{"id", "name", ColPartition, ColOffset, ColTimestamp, ColKey} {
			if !strings.Contains(s, col+":") {
				t.Fatalf("unit schema %s has no column %q", s, col)
			}
		}
	}
}

// A crash — units committed but not acked, and units never committed —
// and a restart from the host's recovered offsets: every record once.
func TestRestartFromRecoveredOffsetsIngestsEachRecordOnce(t *testing.T) {
	c := cluster(t, 1, "events", 3)
	produce(t, c, "events", 0, 3000, nil)
	var logs logbuf.Buffer
	h := newHost(t)
	crash := errors.New("the daemon was killed")
	h.afterCommit = func(n int) error {
		if n >= 5 {
			return crash // committed, never acked
		}
		return nil
	}
	src, err := New(testConfig(c, "events", &logs))
	if err != nil {
		t.Fatal(err)
	}
	_ = runUntil(t, src, h, func() bool { return h.recorded() >= 300 })
	first := h.recorded()
	h.afterCommit = nil
	produce(t, c, "events", 3000, 1000, nil)
	src2, err := New(testConfig(c, "events", &logs))
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntil(t, src2, h, func() bool { return h.recorded() == 4000 }); err != nil {
		t.Fatal(err)
	}
	if first >= 4000 || first < 300 {
		t.Fatalf("the first run recorded %d rows; the test wants a restart in the middle", first)
	}
	wantAll(t, h, "events", endOffsets(t, admin(t, c), "events"))
}

// Records removed by retention before they were ingested stop the
// source, naming the range — or, with on_gap: skip, are logged and
// counted, and the rest is ingested.
func TestRetentionGapIsReportedNeverSkippedSilently(t *testing.T) {
	for _, onGap := range []string{OnGapStop, OnGapSkip} {
		t.Run(onGap, func(t *testing.T) {
			c := cluster(t, 1, "events", 1)
			produce(t, c, "events", 0, 100, nil)
			var logs logbuf.Buffer
			h := newHost(t)
			cfg := testConfig(c, "events", &logs)
			cfg.UnitBytes = 400 // about ten records a unit
			cfg.InFlight = 1
			src, _ := New(cfg)
			if err := runUntil(t, src, h, func() bool { return h.recorded() >= 20 }); err != nil {
				t.Fatal(err)
			}
			at := int64(h.recorded())
			produce(t, c, "events", 100, 100, nil)
			adm := admin(t, c)
			var del kadm.Offsets
			del.Add(kadm.Offset{Topic: "events", Partition: 0, At: 150})
			if _, err := adm.DeleteRecords(context.Background(), del); err != nil {
				t.Fatal(err)
			}
			cfg.OnGap = onGap
			src2, _ := New(cfg)
			err := runUntil(t, src2, h, func() bool { return h.recorded() == int(at)+50 })
			var gap *GapError
			if onGap == OnGapStop {
				if !errors.As(err, &gap) || gap.From != at || gap.To != 150 || gap.Partition != 0 {
					t.Fatalf("Run: %v; want a gap of offsets %d..149", err, at)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("offsets %d..149", at)) {
					t.Errorf("error %q does not name the range", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st := src2.Stats()
			if st.Gaps != 1 || st.GapRecords != uint64(150-at) || !strings.Contains(logs.String(), "records lost to retention") {
				t.Errorf("stats %+v, logs %q: want one gap of %d records, logged", st, logs.String(), 150-at)
			}
			offs := h.offsetsOf()[tp{"events", 0}]
			if int64(len(offs)) != at+50 || offs[at] != 150 {
				t.Errorf("recorded offsets %v…: want 0..%d and 150..199", head(offs), at-1)
			}
		})
	}
}

// Offsets recovered beyond the log's end: the topic is not the one they
// were taken from; the source stops rather than guess.
func TestRecoveredOffsetBeyondTheLogStops(t *testing.T) {
	c := cluster(t, 1, "events", 1)
	produce(t, c, "events", 0, 10, nil)
	var logs logbuf.Buffer
	h := newHost(t)
	h.committed = h.committed.Advance(offsetKey("events", tp{"events", 0}), 500)
	src, _ := New(testConfig(c, "events", &logs))
	err := runUntil(t, src, h, func() bool { return false })
	var ahead *AheadError
	if !errors.As(err, &ahead) || ahead.Resume != 500 || ahead.End != 10 {
		t.Fatalf("Run: %v; want the log ending at 10 before the recovered 500", err)
	}
}

func TestARecordThatIsNotJSONStopsTheSourceNamingIt(t *testing.T) {
	c := cluster(t, 1, "events", 1)
	produce(t, c, "events", 0, 50, func(id int) []byte {
		if id == 37 {
			return []byte(`{"id": 37, "name": `)
		}
		return fmt.Appendf(nil, `{"id": %d}`, id)
	})
	var logs logbuf.Buffer
	h := newHost(t)
	src, _ := New(testConfig(c, "events", &logs))
	err := runUntil(t, src, h, func() bool { return false })
	var re *RecordError
	if !errors.As(err, &re) || re.Offset != 37 || re.Partition != 0 || !strings.Contains(err.Error(), "offset 37") {
		t.Fatalf("Run: %v; want the record at offset 37 named", err)
	}
	if offs := h.offsetsOf()[tp{"events", 0}]; len(offs) != 37 {
		t.Errorf("%d rows recorded; want the 37 before offset 37, none at or after it", len(offs))
	}
}

// Fetches that fail, and a partition whose leader moves, mid-stream:
// every record once.
func TestFetchErrorsAndLeaderMovesLoseNothing(t *testing.T) {
	c := cluster(t, 3, "events", 3)
	produce(t, c, "events", 0, 1500, nil)
	failed := 0
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if failed >= 5 {
			return nil, nil, false
		}
		failed++
		return nil, errors.New("injected: connection dropped"), true
	})
	var logs logbuf.Buffer
	h := newHost(t)
	h.onUnit = func(n int, u engine.Unit) error {
		if n == 10 {
			if err := c.MoveTopicPartition("events", 1, (c.LeaderFor("events", 1)+1)%3); err != nil {
				t.Error(err)
			}
		}
		return nil
	}
	src, _ := New(testConfig(c, "events", &logs))
	if err := runUntil(t, src, h, func() bool { return h.recorded() == 1500 }); err != nil {
		t.Fatal(err)
	}
	if failed < 5 {
		t.Errorf("only %d fetches failed; the test injects 5", failed)
	}
	wantAll(t, h, "events", endOffsets(t, admin(t, c), "events"))
}

// A partition added while the source runs is read from its start.
func TestAPartitionAddedMidRunIsRead(t *testing.T) {
	c := cluster(t, 1, "events", 1)
	produce(t, c, "events", 0, 100, nil)
	var logs logbuf.Buffer
	h := newHost(t)
	adm := admin(t, c)
	added := false
	h.onUnit = func(n int, u engine.Unit) error {
		if !added {
			added = true
			go func() {
				if _, err := adm.CreatePartitions(context.Background(), 2, "events"); err != nil {
					t.Error(err)
				}
				produce(t, c, "events", 100, 300, nil)
			}()
		}
		return nil
	}
	src, _ := New(testConfig(c, "events", &logs))
	if err := runUntil(t, src, h, func() bool { return h.recorded() == 400 }); err != nil {
		t.Fatal(err)
	}
	ends := endOffsets(t, adm, "events")
	if len(ends) != 3 || ends[2] == 0 {
		t.Fatalf("end offsets %v: want three partitions, the new ones written", ends)
	}
	wantAll(t, h, "events", ends)
}
