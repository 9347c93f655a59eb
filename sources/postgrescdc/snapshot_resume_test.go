package postgrescdc

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// snapshotTable is a test table of rows 10, 20, …, 10·n under key id of
// type keyType (its text form, for text keys: 'k' and the number
// zero-padded, so the heap and key orders differ from the numbers').
type snapshotTable struct {
	name, keyType string
	rows          int
}

func (st snapshotTable) key(n int) string {
	if st.keyType == "text" {
		return fmt.Sprintf("'k%06d'", n)
	}
	return fmt.Sprint(n)
}

func (st snapshotTable) create(e *pgEnv) {
	k := "g * 10"
	if st.keyType == "text" {
		k = "'k' || lpad((g * 10)::text, 6, '0')"
	}
	e.exec(fmt.Sprintf(`CREATE TABLE %s (id %s PRIMARY KEY, v text)`, st.name, st.keyType),
		fmt.Sprintf(`INSERT INTO %s SELECT %s, 'v' || g FROM generate_series(1, %d) g`, st.name, k, st.rows))
}

// changes makes, with w, inserts, updates, deletes and key changes on
// both sides of key around (a number): what a resumed snapshot must
// neither lose nor deliver twice.
func (st snapshotTable) changes(w *workload, around int) {
	below, above := around-400, around+400
	w.tx(ch(`UPDATE %s SET v = 'upd' WHERE id IN (%s, %s, %s)`, st.name, st.key(below), st.key(around), st.key(above)))
	w.tx(ch(`DELETE FROM %s WHERE id IN (%s, %s, %s)`, st.name, st.key(below+10), st.key(around-10), st.key(above+10)))
	w.tx(ch(`INSERT INTO %s VALUES (%s, 'new'), (%s, 'new'), (%s, 'new')`, st.name, st.key(below+5), st.key(around+5), st.key(above+5)))
	// A key moving up across the resume point, another moving down.
	w.tx(stmt{fmt.Sprintf(`UPDATE %s SET id = %s WHERE id = %s`, st.name, st.key(above+7), st.key(below+20)), 2})
	w.tx(stmt{fmt.Sprintf(`UPDATE %s SET id = %s WHERE id = %s`, st.name, st.key(below+7), st.key(above+20)), 2})
	// Several rows below the resume point gone: a cut from the start of
	// the table now falls elsewhere than the first run's.
	w.tx(ch(`DELETE FROM %s WHERE id IN (%s, %s, %s, %s)`, st.name, st.key(30), st.key(40), st.key(50), st.key(60)))
	w.check()
}

// stopAtSnapshotUnit returns a recorder whose gate signals, and holds
// for a moment, the n-th snapshot unit with rows (the stop lands while
// it is with the host).
func stopAtSnapshotUnit(n int32) (*recorder, <-chan struct{}) {
	var units atomic.Int32
	reached := make(chan struct{})
	return &recorder{gate: func(u engine.Unit) {
		if len(u.Sidecar.Rows) > 0 && u.Sidecar.Rows[0].Order == 0 && units.Add(1) == n {
			close(reached)
			time.Sleep(100 * time.Millisecond)
		}
	}}, reached
}

// snapshotRecords counts, by identity, the lake's CDC records of ns at
// order token 0: the snapshot rows it holds.
func (l *lake) snapshotRecords(t *testing.T, ns string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, job := range l.mem.Applied() {
		if job.Namespace != ns {
			continue
		}
		for _, sc := range job.Sidecars {
			for _, c := range sc.Rows {
				if c.Order == 0 {
					out[string(c.Identity)]++
				}
			}
		}
	}
	return out
}

// ackedSnapshot returns the identities of the snapshot rows rec acked.
func ackedSnapshot(rec *recorder) map[string]bool {
	out := map[string]bool{}
	for _, a := range rec.ackedRows() {
		if a.order == 0 {
			out[a.identity] = true
		}
	}
	return out
}

// sourceIdentities returns the identities of the rows of table whose
// key satisfies where.
func sourceIdentities(t *testing.T, e *pgEnv, table, where string) map[string]bool {
	t.Helper()
	rows, err := e.db.Query(context.Background(), fmt.Sprintf("SELECT id::text FROM %s WHERE %s", table, where))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		out[string(mustIdentity(t, k))] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkSnapshotRecords fails unless the lake holds, at order token 0,
// each identity of want exactly want[id] times and nothing else.
func checkSnapshotRecords(t *testing.T, l *lake, ns string, want map[string]int) {
	t.Helper()
	got := l.snapshotRecords(t, ns)
	var diff []string
	for _, id := range slices.Sorted(maps.Keys(want)) {
		if got[id] != want[id] {
			diff = append(diff, fmt.Sprintf("%q: %d snapshot records, want %d", id, got[id], want[id]))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[id]; !ok {
			diff = append(diff, fmt.Sprintf("%q: %d snapshot records, want none", id, got[id]))
		}
	}
	if len(diff) > 0 {
		n := len(diff)
		t.Fatalf("table %s: %d identities with the wrong number of snapshot records:\n%s", ns, n, strings.Join(diff[:min(n, 10)], "\n"))
	}
}

// snapshotOffset reads the table's snapshot offset from the host's view.
func snapshotOffset(t *testing.T, view segment.Offsets, e *pgEnv, table string) uint64 {
	t.Helper()
	n, err := parseTableName(table)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := view.Get(snapshotKey(e.slot, n))
	return v
}

// lastKey returns the largest number among the identities of int keys.
func lastKey(t *testing.T, ids map[string]bool) int {
	t.Helper()
	last := -1
	for id := range ids {
		var k int
		if _, err := fmt.Sscan(id[2:], &k); err != nil {
			t.Fatalf("identity %q: %v", id, err)
		}
		last = max(last, k)
	}
	return last
}
