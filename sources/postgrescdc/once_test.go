package postgrescdc

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// onceWait bounds a once Run on a small table: its snapshot, its stream
// up to the mark, and the keepalives it asks for on the way.
const onceWait = 30 * time.Second

// A once Run ends on its own (nil) with the table's rows acked — its
// snapshot on the first run; a second once Run, after more inserts and
// an update, acks exactly the changes made since, and a third, with
// nothing new, acks nothing; every Run confirms the slot up to the
// server's WAL position at its start.
func TestOnceCapturesUpToTheStartPosition(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	e.exec("CREATE TABLE once_t (id int8 PRIMARY KEY, v text)",
		"INSERT INTO once_t SELECT g, 'v' || g FROM generate_series(1, 120) g")
	l := newLake(t)
	h := l.start(t)
	cfg := e.config("public.once_t")
	cfg.Once = true
	cfg.Logger = quietLogger(t)
	runOnce := func(what string) []string {
		t.Helper()
		mark := e.currentLSN()
		r, rec := startSource(t, cfg, h)
		select {
		case err := <-r.done:
			if err != nil {
				t.Fatalf("%s: once Run: %v", what, err)
			}
		case <-time.After(onceWait):
			t.Fatalf("%s: once Run still running after %v", what, onceWait)
		}
		if c, err := e.slotConfirmed(); err != nil || c < mark {
			t.Fatalf("%s: slot confirmed at %d (%v); want at least the position %d read before the Run", what, c, err, mark)
		}
		var got []string
		for _, row := range rec.ackedRows() {
			got = append(got, fmt.Sprintf("%s@%d", row.identity[2:], min(row.order, 1)))
		}
		slices.Sort(got)
		return got
	}
	first := runOnce("the first run")
	var snapshot []string
	for i := 1; i <= 120; i++ {
		snapshot = append(snapshot, fmt.Sprintf("%d@0", i))
	}
	slices.Sort(snapshot)
	if !slices.Equal(first, snapshot) {
		t.Fatalf("the first once run acked %d rows (%q…); want the 120 of the snapshot at order 0", len(first), first[:min(3, len(first))])
	}
	e.exec("INSERT INTO once_t SELECT g, 'v' || g FROM generate_series(121, 130) g", "UPDATE once_t SET v = 'x' WHERE id = 5")
	second := runOnce("the second run")
	want := []string{"121@1", "122@1", "123@1", "124@1", "125@1", "126@1", "127@1", "128@1", "129@1", "130@1", "5@1"}
	slices.Sort(want)
	if !slices.Equal(second, want) {
		t.Fatalf("the second once run acked %q; want the 11 changes since, streamed: %q", second, want)
	}
	if third := runOnce("a run with nothing new"); len(third) != 0 {
		t.Fatalf("a once run with nothing new acked %q", third)
	}
}

// currentLSN reads the server's WAL position now.
func (e *pgEnv) currentLSN() uint64 {
	e.t.Helper()
	var lsn uint64
	if err := e.db.QueryRow(context.Background(), "SELECT (pg_current_wal_lsn() - '0/0')::int8").Scan(&lsn); err != nil {
		e.t.Fatal(err)
	}
	return lsn
}
