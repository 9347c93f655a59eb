package engine

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/skipprd/skipprd/engine/segment"
)

func TestSnapshotIDSortsInCommitOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := SnapshotID{Epoch: rapid.Uint64Range(0, 1e11).Draw(t, "ae"), Seq: rapid.Uint64Range(0, 1e11).Draw(t, "as")}
		b := SnapshotID{Epoch: rapid.Uint64Range(0, 1e11).Draw(t, "be"), Seq: rapid.Uint64Range(0, 1e11).Draw(t, "bs")}
		if a.Less(b) != (a.String() < b.String()) {
			t.Fatalf("%s < %s is %v, but the strings say %v", a, b, a.Less(b), a.String() < b.String())
		}
		back, ok := ParseSnapshotID(a.String())
		if !ok || back != a {
			t.Fatalf("parse %s: %v %v", a, back, ok)
		}
	})
}

func TestLayoutKeys(t *testing.T) {
	l := NewLayout("/wal/", "orders-pipeline")
	dir := l.SegmentDir(1785585600000) // 2026-08-01T12:00Z
	if want := "wal/orders-pipeline/p_year=2026/p_month=08/p_day=01/"; dir != want {
		t.Fatalf("dir %q, want %q", dir, want)
	}
	id := SnapshotID{Epoch: 7, Seq: 42}
	for _, kind := range []ObjectKind{KindBody, KindMarker, KindBitmap} {
		key := l.Key(dir, id, kind)
		gotDir, gotID, gotKind, ok := l.ParseKey(key)
		if !ok || gotDir != dir || gotID != id || gotKind != kind {
			t.Fatalf("ParseKey(%q) = %q %v %v %v", key, gotDir, gotID, gotKind, ok)
		}
	}
	if got := l.Key(dir, id, KindMarker); got != dir+"000000000007-000000000042.seg.commit" {
		t.Fatalf("marker key %q", got)
	}
	for _, bad := range []string{
		"wal/orders-pipeline/_writer",
		"wal/other/p_year=2026/p_month=08/p_day=01/000000000007-000000000042.seg",
		dir + "7-42.seg",
		dir + "000000000007-000000000042.parquet",
	} {
		if _, _, _, ok := l.ParseKey(bad); ok {
			t.Errorf("ParseKey(%q) accepted a key that is not a segment object", bad)
		}
	}
	if NewLayout("", "p").Root() != "p/" {
		t.Fatal("empty prefix")
	}
}

func TestDeriveConfigClamps(t *testing.T) {
	for _, c := range []struct {
		threshold int64
		threads   int
		target    int64
		queue     int
	}{
		{0, 0, TargetBytesMin, QueueCapacityMin},
		{1 << 40, 1000, TargetBytesMax, QueueCapacityMax},
		{10 << 20, 8, 10 << 20, 8},
	} {
		cfg := DeriveConfig("", "p", c.threshold, c.threads, 0)
		if cfg.TargetBytes != c.target || cfg.QueueCapacity != c.queue || cfg.MaxDelay != DefaultMaxDelay {
			t.Errorf("DeriveConfig(%d, %d) = target %d queue %d delay %v", c.threshold, c.threads, cfg.TargetBytes, cfg.QueueCapacity, cfg.MaxDelay)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("derived config invalid: %v", err)
		}
	}
	bad := DeriveConfig("", "", 0, 0, 0)
	if bad.Validate() == nil {
		t.Error("empty pipeline accepted")
	}
}

func TestLimitsRelations(t *testing.T) {
	if markerReadLimit < segment.MarkerBytesMax {
		t.Fatalf("markerReadLimit %d below segment.MarkerBytesMax %d", markerReadLimit, segment.MarkerBytesMax)
	}
	if !slices.IsSorted([]int64{TargetBytesMin, TargetBytesMax}) || flushDelayMin > flushDelayCold || flushDelayCold > flushDelayMax {
		t.Fatal("flush bounds out of order")
	}
}

// The adaptive delay: clamp(100ms, min(4 × persist EMA, fill time), 500ms),
// 250 ms cold, never above MaxDelay.
func TestFlushDelay(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name     string
		ema      time.Duration
		rate     float64 // bytes/s
		live     int64
		maxDelay time.Duration
		want     time.Duration
	}{
		{"cold start", 0, 0, 0, time.Minute, 250 * ms},
		{"4 x EMA", 50 * ms, 0, 0, time.Minute, 200 * ms},
		{"floor", 10 * ms, 0, 0, time.Minute, 100 * ms},
		{"ceiling", 400 * ms, 0, 0, time.Minute, 500 * ms},
		{"fill time wins", 100 * ms, 10 << 20, 8 << 20, time.Minute, 200 * ms}, // 2 MiB left at 10 MiB/s
		{"fill time floored", 100 * ms, 1 << 40, 0, time.Minute, 100 * ms},
		{"max delay caps", 100 * ms, 0, 0, 30 * ms, 30 * ms},
	} {
		e := &Engine{cfg: Config{TargetBytes: 10 << 20, MaxDelay: c.maxDelay},
			writing: writing{persistEMA: c.ema, live: newBatchSet()}, admission: admission{rateEMA: c.rate}}
		e.dlog = s3Log{e}
		e.live.bytes = c.live
		if got := e.flushDelay(); got != c.want {
			t.Errorf("%s: delay %v, want %v", c.name, got, c.want)
		}
	}
}
