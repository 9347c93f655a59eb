package postgrescdc

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/storage"
)

// A source stopped after some snapshot units of a table with one int8
// key were acked, then started again after inserts, updates, deletes
// and key changes on both sides of the last key it acked, resumes after
// that key: the lake holds each snapshot row once — the first run's up
// to its last key, the second's above it, as the table was when it
// started — and, with the changes, equals the source.
func TestSnapshotResumesAfterTheLastKey(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	st := snapshotTable{name: "ints", keyType: "int8", rows: 2000}
	tables, l, h, cfg, rec1, first := stopMidSnapshot(t, e, st)
	last := lastKey(t, first)
	if want := sourceIdentities(t, e, st.name, fmt.Sprintf("id <= %d", last)); len(first) >= st.rows || !maps.Equal(first, want) {
		t.Fatalf("the first run acked %d snapshot rows up to key %d; want the %d rows up to it, fewer than %d", len(first), last, len(want), st.rows)
	}
	view, err := h.Offsets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checkKeyedOffset(t, snapshotOffset(t, view, e, tables[0]), int64(last), false)

	w := &workload{t: t, conn: e.db}
	st.changes(w, last)
	second := sourceIdentities(t, e, st.name, fmt.Sprintf("id > %d", last))
	resumeAndCheck(t, e, l, h, cfg, st, w, rec1, first, second)
	if view, err = h.Offsets(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkKeyedOffset(t, snapshotOffset(t, view, e, tables[0]), int64(lastKey(t, second)), true)
}

// stopMidSnapshot creates st's table and runs a source over it until its
// third snapshot unit is acked, then stops it: the lake and host it ran
// on, its configuration, what it acked, and the snapshot rows acked.
func stopMidSnapshot(t *testing.T, e *pgEnv, st snapshotTable) ([]string, *lake, *storage.Host, Config, *recorder, map[string]bool) {
	t.Helper()
	st.create(e)
	tables := []string{"public." + st.name}
	l := newLake(t)
	h := l.start(t)
	cfg := e.config(tables...)
	cfg.Logger = quietLogger(t)
	rec1, third := stopAtSnapshotUnit(3)
	r1 := startOn(t, cfg, h, rec1.wrap(h.Ingest))
	r1.await(t, 20*time.Second, "the third snapshot unit", func() bool {
		select {
		case <-third:
			return true
		default:
			return false
		}
	})
	if err := r1.stop(t); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	return tables, l, h, cfg, rec1, ackedSnapshot(rec1)
}

// resumeAndCheck starts the second source over what the first left and
// checks the lake: the stream's changes applied over the snapshot equal
// the source, each identity of first and of second is a snapshot record
// once per set it is in, and nothing was acked twice.
func resumeAndCheck(t *testing.T, e *pgEnv, l *lake, h *storage.Host, cfg Config, st snapshotTable, w *workload,
	rec1 *recorder, first, second map[string]bool) {
	t.Helper()
	r2, rec2 := startSource(t, cfg, h)
	checkLake(t, e, l, []string{"public." + st.name}, w.changes)
	want := map[string]int{}
	for id := range first {
		want[id]++
	}
	for id := range second {
		want[id]++
	}
	checkSnapshotRecords(t, l, st.name, want)
	if err := r2.stop(t); err != nil {
		t.Fatalf("second Run: %v", err)
	}
	checkAckedOnce(t, rec1, rec2)
}

// checkKeyedOffset fails unless v is a snapshot offset of the key scheme
// at key, done or not as said.
func checkKeyedOffset(t *testing.T, v uint64, key int64, done bool) {
	t.Helper()
	k, keyed := snapshotKeyOf(v)
	if !keyed || k != key || (v&snapshotDone != 0) != done {
		t.Fatalf("snapshot offset %#x: keyed %v at key %d, done %v; want keyed at key %d, done %v",
			v, keyed, k, v&snapshotDone != 0, key, done)
	}
}

// The same for a table with a text key: its snapshot is redone whole.
// The lake holds the rows of the first attempt's acked units, then every
// row of the table as it was when the second attempt started: a row in
// both is there twice, both at order token 0, and applying the lake with
// the sink's rule still gives the source.
func TestSnapshotWithTextKeyIsRedone(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	st := snapshotTable{name: "words", keyType: "text", rows: 2000}
	tables, l, h, cfg, rec1, first := stopMidSnapshot(t, e, st)
	if len(first) == 0 || len(first) >= st.rows {
		t.Fatalf("the first run acked %d snapshot rows; want some of %d", len(first), st.rows)
	}
	w := &workload{t: t, conn: e.db}
	st.changes(w, 10*len(first))
	second := sourceIdentities(t, e, st.name, "true")
	resumeAndCheck(t, e, l, h, cfg, st, w, rec1, first, second)
	view, err := h.Offsets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v := snapshotOffset(t, view, e, tables[0]); v&snapshotDone == 0 || (v&^snapshotDone)>>32 != 2 {
		t.Fatalf("snapshot offset %#x: want attempt 2, done", v)
	}
}

// replayedSnapshot runs a source over st's table until the host is
// killed just after committing its third snapshot unit with rows, before
// the source hears the ack; it returns the identities of the rows of
// the units the host committed (the third's too).
func replayedSnapshot(t *testing.T, e *pgEnv, l *lake, cfg Config) map[string]bool {
	t.Helper()
	h1 := l.start(t)
	cfg.HostOffsets = h1.Offsets
	src1, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu        sync.Mutex
		committed = map[string]bool{}
		units     atomic.Int32
		killed    atomic.Bool
	)
	unanswered := make(chan struct{})
	ingest := func(ctx context.Context, u engine.Unit) error {
		if killed.Load() {
			return storage.ErrStopped
		}
		err := h1.Ingest(ctx, u)
		if err != nil || len(u.Sidecar.Rows) == 0 || u.Sidecar.Rows[0].Order != 0 {
			return err
		}
		mu.Lock()
		for _, c := range u.Sidecar.Rows {
			committed[string(c.Identity)] = true
		}
		mu.Unlock()
		if units.Add(1) == 3 && killed.CompareAndSwap(false, true) {
			h1.Kill()
			close(unanswered)
			return storage.ErrUnanswered
		}
		return nil
	}
	r1 := run(t, src1, ingest, nil)
	select {
	case <-unanswered:
	case <-time.After(20 * time.Second):
		t.Fatal("no third snapshot unit")
	}
	if err := r1.stop(t); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return maps.Clone(committed)
}

// After a crash the host replays the snapshot units it had acked but
// not yet written to a segment, pending until they are: a source handed
// a view without them (here: none of the snapshot's) must still neither
// deliver a snapshot row twice (int key: it resumes after the key the
// host holds once its first unit, of one row, is answered) nor lose one
// (text key: the redone attempt is numbered above the host's, learnt
// from a first unit of no rows), though rows below the host's last key
// were deleted meanwhile, so that a cut from the start falls elsewhere.
func TestSnapshotAfterTheHostReplays(t *testing.T) {
	for _, keyType := range []string{"int8", "text"} {
		t.Run(keyType, func(t *testing.T) {
			t.Parallel()
			e := newPGEnv(t)
			st := snapshotTable{name: "r_" + keyType, keyType: keyType, rows: 2000}
			st.create(e)
			tables := []string{"public." + st.name}
			l := newLake(t)
			cfg := e.config(tables...)
			cfg.Logger = quietLogger(t)
			first := replayedSnapshot(t, e, l, cfg)
			w := &workload{t: t, conn: e.db}
			st.changes(w, 10*len(first))
			second := sourceIdentities(t, e, st.name, "true")
			if keyType == "int8" {
				second = sourceIdentities(t, e, st.name, fmt.Sprintf("id > %d", lastKey(t, first)))
			}

			h2 := l.start(t)
			cfg.HostOffsets = h2.Offsets
			src2, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			rec2 := &recorder{}
			r2 := run(t, src2, rec2.wrap(h2.Ingest), segment.Offsets(nil)) // as a daemon reading the view too early would
			checkLake(t, e, l, tables, w.changes)
			want := map[string]int{}
			for id := range first {
				want[id]++
			}
			for id := range second {
				want[id]++
			}
			checkSnapshotRecords(t, l, st.name, want)
			if err := r2.stop(t); err != nil {
				t.Fatal(err)
			}
			checkAckedOnce(t, rec2)
		})
	}
}
