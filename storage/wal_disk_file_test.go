package storage

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/diskstore"
	"github.com/skipprd/skipprd/engine/wal"
)

// loggedIdempotencyKeys reads every log segment under dir as the OS has
// it and returns, per file, the idempotency keys of its unit records.
func loggedIdempotencyKeys(t *testing.T, dir string) map[string]map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, wal.Root, "partition-*", "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for _, f := range files {
		keys := map[string]bool{}
		out[f] = keys
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ent := range wal.Scan(f, b).Entries {
			rec, err := wal.DecodeRecord(f, ent.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if u, ok := rec.(*wal.UnitRecord); ok {
				keys[u.IdempotencyKey] = true
			}
		}
	}
	return out
}

// Over real files — with O_DIRECT where the filesystem takes it — every
// batch of the disk WAL rewrites the partly filled last block of its
// segment (writes start and end on 4096-byte boundaries). Units submitted
// one at a time make every batch such a rewrite. After each ack the
// files, read back, hold the unit just acked, and every file still holds
// every acked unit it held before (a segment leaves whole, once its
// generations are flushed — never an entry of it).
func TestDiskWALRewriteKeepsAckedEntries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var logged bytes.Buffer
	loop := NewLoop()
	disk, err := NewOSDisk(loop, dir, DiskOptions{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.DeriveConfig("wal", "rewrite", 4<<20, 1, time.Hour)
	cfg.Disk = engine.DefaultDiskWAL()
	cfg.Disk.SegmentBytes = 64 << 10 // several segments, so rolling is covered too
	cfg.Disk.BatchBytes = 16 << 10
	cfg.Disk.PartitionBytesMax = 64 << 20
	cfg.FenceWait = 0
	h, err := NewHost(cfg, loop, HostPorts{Store: diskstore.New(disk, loop.Clock(), NewRand(), "segments"), Disk: disk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	startHost(t, ctx, h)
	before := map[string]map[string]bool{}
	for i := range 150 {
		u := walSpec{uid: fmt.Sprint("u", i), ns: "ns", rows: 3, payloadBytes: 40 + i%300}.unit()
		u.IdempotencyKey = fmt.Sprint("key-", i)
		mustIngest(t, ctx, h, u)
		now := loggedIdempotencyKeys(t, dir)
		found := false
		for _, keys := range now {
			found = found || keys[u.IdempotencyKey]
		}
		if !found {
			t.Fatalf("unit %s acked, but no log file holds it", u.IdempotencyKey)
		}
		for f, keys := range before {
			if now[f] == nil {
				continue // deleted whole
			}
			for k := range keys {
				if !now[f][k] {
					t.Fatalf("after %d acks %s lost acked unit %s", i+1, f, k)
				}
			}
		}
		before = now
	}
	st, err := h.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.WALSyncs < 150 || st.WALSegmentsCreated < 2 {
		t.Fatalf("%d group commits, %d segments: want one batch per unit and a roll", st.WALSyncs, st.WALSegmentsCreated)
	}
	direct := !strings.Contains(logged.String(), "O_DIRECT")
	t.Logf("O_DIRECT used: %v (%d group commits, %d segments)", direct, st.WALSyncs, st.WALSegmentsCreated)
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
