package storage

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/diskstore"
	"github.com/skipprd/skipprd/engine/segment"
)

// heldPuts is a segment store whose segment writes (bodies and
// markers) wait until release: a replayed generation cannot commit
// before then, while recovery's own objects go through.
type heldPuts struct {
	engine.ObjectStore
	loop    *Loop
	release chan struct{}
}

func (s heldPuts) PutObject(in engine.PutObjectInput, done func(etag string, err error)) {
	if !strings.Contains(in.Key, ".seg") {
		s.ObjectStore.PutObject(in, done)
		return
	}
	go func() {
		<-s.release
		s.loop.Post(func() { s.ObjectStore.PutObject(in, done) })
	}()
}

// A restart of a disk WAL replays acked units from its log; the offsets
// view learns theirs only when their generation commits. ResumeOffsets
// waits for that commit, so a source resuming from it never reads
// those units' input again.
func TestResumeOffsetsWaitsForTheReplayedUnits(t *testing.T) {
	t.Parallel()
	dir, ctx := t.TempDir(), testCtx(t)
	cfg := engine.DeriveConfig("wal", "resume", 64<<20, 1, time.Hour) // nothing is sealed by size or age
	cfg.Disk = engine.DefaultDiskWAL()
	cfg.FenceWait = 0
	open := func(release chan struct{}) *Host {
		loop := NewLoop()
		disk, err := NewOSDisk(loop, dir, DiskOptions{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		var store engine.ObjectStore = diskstore.New(disk, loop.Clock(), NewRand(), "segments")
		if release != nil {
			store = heldPuts{store, loop, release}
		}
		h, err := NewHost(cfg, loop, HostPorts{Store: store, Disk: disk})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := open(nil)
	startHost(t, ctx, h)
	for i := range 20 {
		u := walSpec{uid: fmt.Sprint("u", i), ns: "ns", rows: 2, payloadBytes: 100}.unit()
		u.Offsets = segment.Offsets{{Key: "src/p0", Value: uint64(i + 1)}}
		mustIngest(t, ctx, h, u)
	}
	h.Kill()

	release := make(chan struct{})
	h = open(release)
	startHost(t, ctx, h)
	defer h.Kill()
	got := make(chan segment.Offsets, 1)
	go func() {
		o, err := h.ResumeOffsets(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- o
	}()
	select {
	case o := <-got:
		t.Fatalf("ResumeOffsets answered %v before the replayed units committed", o)
	case <-time.After(200 * time.Millisecond):
	}
	if o, err := h.Offsets(ctx); err != nil || len(o) != 0 {
		t.Fatalf("the offsets view before the replayed commit: %v, %v; want empty", o, err)
	}
	close(release)
	o := <-got
	if v, ok := o.Get("src/p0"); !ok || v != 20 {
		t.Fatalf("ResumeOffsets: %v; want src/p0 at 20, the last replayed unit's", o)
	}
}
