package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sinks/postgres"
)

// The Postgres destination's table oracle (sim.TableChecker), run after
// convergence against the acknowledged-change ledger:
//
//   - a CDC table is, identity by identity, what applying every
//     acknowledged change once, in order-token order, makes of an empty
//     table (postgres.ApplyChange) — its newest change, a delete leaving
//     a tombstone — and holds no other identity;
//   - a plain table holds every acknowledged row exactly once, with the
//     values its source produced, and no other row.
//
// The job digests (Contents) prove each job committed once; this proves
// what committing them did to the tables, whatever order the jobs, the
// retries and the zombie commits came in.

// CheckTables implements sim.TableChecker.
func (d *pgDest) CheckTables(acked sim.Acked) []string {
	var bad []string
	for _, ns := range acked.Namespaces() {
		t := d.model.Table(ns.Name)
		if ns.CDC {
			bad = append(bad, checkCDCTable(ns.Name, t, ackedChanges(acked, ns.Name))...)
		} else {
			bad = append(bad, checkPlainTable(ns.Name, t, ackedRows(acked, ns.Name))...)
		}
	}
	return bad
}

// change is one acknowledged CDC change, its row's values rendered as
// the model renders them.
type change struct {
	unit     sim.UID
	identity string
	order    uint64
	deleted  bool
	values   []string
}

func ackedChanges(acked sim.Acked, ns string) []change {
	var out []change
	acked.Units(ns, func(u sim.AckedUnit) {
		for i, c := range u.Changes {
			out = append(out, change{unit: u.UID, identity: string(c.Identity), order: c.Order,
				deleted: c.Kind == segment.Delete, values: rowValues(u.Batch, i)})
		}
	})
	return out
}

// rowValues renders row i of b, a value per column (Array.ValueStr).
func rowValues(b arrow.RecordBatch, i int) []string {
	values := make([]string, b.NumCols())
	for c, col := range b.Columns() {
		values[c] = col.ValueStr(i)
	}
	return values
}

// checkCDCTable compares a CDC table (nil: never created) with the fold
// of the acknowledged changes.
func checkCDCTable(table string, t *postgres.ModelTable, changes []change) []string {
	want, bad := foldChanges(table, changes)
	var got map[string]postgres.RowState
	if t != nil {
		got = t.State
		if len(t.Rows) > 0 {
			bad = append(bad, fmt.Sprintf("CDC table %s holds %d plain rows", table, len(t.Rows)))
		}
	}
	ids := slices.Sorted(maps.Keys(want))
	for id := range got {
		if _, ok := want[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		g, inTable := got[id]
		w, acked := want[id]
		switch {
		case !inTable:
			bad = append(bad, fmt.Sprintf("table %s lacks identity %q; the acknowledged changes leave it %s", table, id, describe(w)))
		case !acked:
			bad = append(bad, fmt.Sprintf("table %s holds identity %q (%s), which no acknowledged change names", table, id, describe(g)))
		case g.Order != w.Order || g.Deleted != w.Deleted || !slices.Equal(g.Values, w.Values):
			bad = append(bad, fmt.Sprintf("table %s identity %q is %s; the acknowledged changes applied once in token order make it %s",
				table, id, describe(g), describe(w)))
		}
	}
	return bad
}

// foldChanges applies the changes once each, in order-token order, to an
// empty table. Two changes of one identity and token are a broken
// workload: the rule would keep either.
func foldChanges(table string, changes []change) (map[string]postgres.RowState, []string) {
	sorted := slices.Clone(changes)
	slices.SortFunc(sorted, func(a, b change) int {
		return cmp.Or(cmp.Compare(a.order, b.order), strings.Compare(a.identity, b.identity))
	})
	var bad []string
	want := map[string]postgres.RowState{}
	for i, c := range sorted {
		if i > 0 && sorted[i-1].order == c.order && sorted[i-1].identity == c.identity {
			bad = append(bad, fmt.Sprintf("table %s: units %s and %s both change identity %q at token %d", table, sorted[i-1].unit, c.unit, c.identity, c.order))
		}
		cur, ok := want[c.identity]
		if next, changed := postgres.ApplyChange(cur, ok, c.order, c.deleted, c.values); changed {
			want[c.identity] = next
		}
	}
	return want, bad
}

func describe(s postgres.RowState) string {
	v := strings.Join(s.Values, ",")
	if len(v) > 60 {
		v = v[:60] + "…"
	}
	if s.Deleted {
		return fmt.Sprintf("deleted at token %d", s.Order)
	}
	return fmt.Sprintf("at token %d with [%s]", s.Order, v)
}

// plainRow is one acknowledged row of a plain table: its uid and row
// number, rendered as the model renders values, and its payload.
type plainRow struct {
	unit              sim.UID
	uid, row, payload string
}

func (r plainRow) key() string { return r.uid + "/" + r.row }

func ackedRows(acked sim.Acked, ns string) []plainRow {
	var out []plainRow
	acked.Units(ns, func(u sim.AckedUnit) {
		col := func(name string) arrow.Array {
			idx := u.Batch.Schema().FieldIndices(name)
			if len(idx) != 1 {
				panic(fmt.Sprintf("simulate: unit %s has no column %s", u.UID, name)) // the world built it
			}
			return u.Batch.Column(idx[0])
		}
		uids, rows, payloads := col("uid"), col("row"), col("payload")
		for i := range int(u.Batch.NumRows()) {
			out = append(out, plainRow{unit: u.UID, uid: uids.ValueStr(i), row: rows.ValueStr(i), payload: payloads.ValueStr(i)})
		}
	})
	return out
}

// checkPlainTable: every acknowledged row once, as produced, and nothing
// else.
func checkPlainTable(table string, t *postgres.ModelTable, want []plainRow) []string {
	var bad []string
	have := map[string][]int{} // row key → its indices in t.Rows
	if t != nil {
		if len(t.State) > 0 {
			bad = append(bad, fmt.Sprintf("plain table %s holds %d CDC rows", table, len(t.State)))
		}
		for i, r := range t.Rows {
			k := r["uid"] + "/" + r["row"]
			have[k] = append(have[k], i)
		}
	}
	for _, w := range want {
		at := have[w.key()]
		switch {
		case len(at) == 0:
			bad = append(bad, fmt.Sprintf("table %s lacks row %s of acknowledged unit %s", table, w.row, w.unit))
		case len(at) > 1:
			bad = append(bad, fmt.Sprintf("table %s holds row %s of unit %s %d times", table, w.row, w.unit, len(at)))
		case t.Rows[at[0]]["payload"] != w.payload:
			bad = append(bad, fmt.Sprintf("table %s row %s of unit %s has another payload than its source produced", table, w.row, w.unit))
		}
		delete(have, w.key())
	}
	if t == nil {
		return bad
	}
	for _, r := range t.Rows {
		k := r["uid"] + "/" + r["row"]
		if _, left := have[k]; left {
			bad = append(bad, fmt.Sprintf("table %s holds row uid=%s row=%s, which no acknowledged unit has", table, r["uid"], r["row"]))
			delete(have, k)
		}
	}
	return bad
}
