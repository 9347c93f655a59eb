package generator

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
)

// The pacer's schedule: a unit goes out when its last row is due; a
// partition far behind restarts its schedule instead of bursting.
func TestPacerSchedule(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	p := newPacer(100, t0, 500) // 100 rows/s from offset 500
	cases := []struct {
		name    string
		now     time.Duration // after t0
		next, n uint64
		want    time.Duration
	}{
		{"first unit waits for its rows", 0, 500, 10, 100 * time.Millisecond},
		{"on time", 100 * time.Millisecond, 510, 10, 100 * time.Millisecond},
		{"slightly late goes at once", 350 * time.Millisecond, 520, 10, 0},
		{"late within lagMax catches up", 1200 * time.Millisecond, 530, 10, 0},
	}
	for _, c := range cases {
		if got := p.wait(t0.Add(c.now), c.next, c.n); got != c.want {
			t.Fatalf("%s: wait %v, want %v", c.name, got, c.want)
		}
	}
	// 5 s later, 540 was due at 0.4 s: far behind, so the schedule
	// restarts at now with 540 as its origin.
	now := t0.Add(5 * time.Second)
	if got := p.wait(now, 540, 10); got != 100*time.Millisecond {
		t.Fatalf("after a stall: wait %v, want a fresh 100ms", got)
	}
	if got := p.wait(now.Add(100*time.Millisecond), 550, 10); got != 100*time.Millisecond {
		t.Fatalf("after the restart: wait %v, want 100ms", got)
	}
	if got := newPacer(0, t0, 0).wait(t0, 0, 1_000_000); got != 0 {
		t.Fatalf("unpaced: wait %v", got)
	}
}

// In real time the streams keep their shape: the busy stream produces
// about its rate, the trickle a few rows, the snapshot exactly its total
// and then nothing more.
func TestRunRateShape(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about a second")
	}
	streams := []Stream{
		{Namespace: "events", Partitions: 4, RowsPerSecond: 4000, BatchRows: 100},
		{Namespace: "pageviews", Partitions: 1, RowsPerSecond: 20, BatchRows: 5},
		{Namespace: "orders", Partitions: 1, RowsPerSecond: 2000, BatchRows: 100, TotalRows: 300},
		{Namespace: "sessions", Partitions: 1, RowsPerSecond: 400, BatchRows: 20},
	}
	g := New(Config{Streams: streams, Allocator: memory.NewGoAllocator(), Logger: quiet})
	const runFor = 1200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()
	ok := func(context.Context, engine.Unit) error { return nil }
	start := time.Now()
	if err := g.Run(ctx, ok, nil); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start).Seconds()
	rows := map[string]uint64{}
	for _, o := range g.Positions() {
		rows[o.Key[len("generator/"):len(o.Key)-2]] += o.Value
	}
	within := func(ns string, rate float64) {
		want := rate * elapsed
		if got := float64(rows[ns]); got < 0.4*want || got > 1.1*want+1 {
			t.Errorf("%s: %v rows in %.2fs, want about %.0f", ns, got, elapsed, want)
		}
	}
	within("events", 4000)
	within("sessions", 400)
	within("pageviews", 20)
	if rows["orders"] != 300 {
		t.Errorf("orders: %d rows, want the snapshot's 300", rows["orders"])
	}
	if !(rows["events"] > 5*rows["sessions"] && rows["sessions"] > 5*rows["pageviews"]) {
		t.Errorf("shape lost: %v", rows)
	}
}
