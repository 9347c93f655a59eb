package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sinks/postgres"
)

var testUnitSchema = arrow.NewSchema([]arrow.Field{
	{Name: "uid", Type: arrow.PrimitiveTypes.Int64},
	{Name: "row", Type: arrow.PrimitiveTypes.Int32},
	{Name: "payload", Type: arrow.BinaryTypes.String},
}, nil)

// testBatch is unit uid's rows in the unit schema, payloads p<uid>.<row>.
func testBatch(uid int64, rows int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testUnitSchema)
	defer b.Release()
	for r := range rows {
		b.Field(0).(*array.Int64Builder).Append(uid)
		b.Field(1).(*array.Int32Builder).Append(int32(r))
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("p%d.%d", uid, r))
	}
	return b.NewRecordBatch()
}

// testChange is one change of a test CDC unit.
type testChange struct {
	id    string
	order uint64
	kind  segment.MutationKind
}

// cdcUnit is a CDC unit: its batch and one change per row.
type cdcUnit struct {
	uid     int64
	batch   arrow.RecordBatch
	changes []segment.CDCRow
}

func newCDCUnit(uid int64, cs ...testChange) cdcUnit {
	u := cdcUnit{uid: uid, batch: testBatch(uid, len(cs))}
	for _, c := range cs {
		u.changes = append(u.changes, segment.CDCRow{Kind: c.kind, Identity: []byte(c.id), Order: c.order})
	}
	return u
}

// apply commits units as one job of table into m.
func apply(t *testing.T, m *postgres.Model, job, table string, cdc bool, units ...cdcUnit) {
	t.Helper()
	cols, err := postgres.Columns(table, testUnitSchema, cdc)
	if err != nil {
		t.Fatal(err)
	}
	tx := &postgres.Tx{JobID: job, Table: table, Columns: cols, Schema: testUnitSchema, CDC: cdc}
	for _, u := range units {
		tx.Batches = append(tx.Batches, u.batch)
		tx.Rows += u.batch.NumRows()
		if cdc {
			tx.Changes = append(tx.Changes, u.changes...)
		}
	}
	if _, err := m.Apply(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
}

// changesOf is the ledger's view of units.
func changesOf(units ...cdcUnit) []change {
	var out []change
	for _, u := range units {
		for i, c := range u.changes {
			out = append(out, change{unit: sim.UID(u.uid), identity: string(c.Identity), order: c.Order,
				deleted: c.Kind == segment.Delete, values: rowValues(u.batch, i)})
		}
	}
	return out
}

func wantBad(t *testing.T, bad []string, substr string) {
	t.Helper()
	if substr == "" {
		if len(bad) > 0 {
			t.Fatalf("unexpected violations: %q", bad)
		}
		return
	}
	for _, b := range bad {
		if strings.Contains(b, substr) {
			return
		}
	}
	t.Fatalf("no violation containing %q; got %q", substr, bad)
}

// The CDC table oracle: quiet for a model that received the changes in
// jobs out of token order, a job replayed; loud for a model where a
// change was dropped, an older change overwrote a newer one, an identity
// appeared that no change names, or a delete resurrected.
func TestCDCTableOracle(t *testing.T) {
	u1 := newCDCUnit(1, testChange{"a", 50, segment.Insert}, testChange{"b", 10, segment.Insert})
	u2 := newCDCUnit(2, testChange{"a", 20, segment.Update}, testChange{"c", 30, segment.Insert}) // older than u1's a
	u3 := newCDCUnit(3, testChange{"b", 40, segment.Delete}, testChange{"c", 35, segment.Update})
	u4 := newCDCUnit(4, testChange{"b", 15, segment.Update}) // arrives after b's delete, older
	all := changesOf(u1, u2, u3, u4)
	build := func(units ...cdcUnit) *postgres.Model {
		m := postgres.NewModel()
		for i, u := range units {
			apply(t, m, fmt.Sprintf("job%d", u.uid), "orders", true, u)
			if i == 0 {
				apply(t, m, fmt.Sprintf("job%d", u.uid), "orders", true, u) // a replay: no-op
			}
		}
		return m
	}
	for _, c := range []struct {
		name   string
		model  func() *postgres.Model
		tamper func(tb *postgres.ModelTable)
		want   string
	}{
		{"out of order, replayed", func() *postgres.Model { return build(u3, u1, u4, u2) }, nil, ""},
		{"in order", func() *postgres.Model { return build(u1, u2, u3, u4) }, nil, ""},
		{"a change dropped", func() *postgres.Model { return build(u1, u2, u4) }, nil, `identity "b" is at token 15`},
		{"an older change applied over a newer", func() *postgres.Model { return build(u3, u1, u4, u2) },
			func(tb *postgres.ModelTable) {
				tb.State["a"] = postgres.RowState{Order: 20, Values: rowValues(u2.batch, 0)}
			}, `identity "a" is at token 20`},
		{"a delete resurrected", func() *postgres.Model { return build(u3, u1, u4, u2) },
			func(tb *postgres.ModelTable) { s := tb.State["b"]; s.Deleted = false; tb.State["b"] = s }, `identity "b"`},
		{"an identity nobody changed", func() *postgres.Model { return build(u1, u2, u3, u4) },
			func(tb *postgres.ModelTable) { tb.State["zz"] = postgres.RowState{Order: 1} }, `"zz"`},
		{"a change's values lost", func() *postgres.Model { return build(u1, u2, u3, u4) },
			func(tb *postgres.ModelTable) { s := tb.State["c"]; s.Values = nil; tb.State["c"] = s }, `identity "c"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := c.model()
			tb := m.Table("orders")
			if c.tamper != nil {
				c.tamper(tb)
			}
			wantBad(t, checkCDCTable("orders", tb, all), c.want)
		})
	}
	wantBad(t, checkCDCTable("orders", nil, all), `table orders lacks identity "a"`)
	wantBad(t, checkCDCTable("orders", nil, nil), "")
	dup := changesOf(u1, newCDCUnit(9, testChange{"a", 50, segment.Update}))
	wantBad(t, checkCDCTable("orders", nil, dup), "both change identity")
}

// The plain table oracle: every acknowledged row once, as produced, and
// nothing else.
func TestPlainTableOracle(t *testing.T) {
	u1, u2 := cdcUnit{uid: 1, batch: testBatch(1, 3)}, cdcUnit{uid: 2, batch: testBatch(2, 2)}
	var want []plainRow
	for _, u := range []cdcUnit{u1, u2} {
		for i := range int(u.batch.NumRows()) {
			v := rowValues(u.batch, i)
			want = append(want, plainRow{unit: sim.UID(u.uid), uid: v[0], row: v[1], payload: v[2]})
		}
	}
	for _, c := range []struct {
		name   string
		jobs   [][]cdcUnit
		tamper func(tb *postgres.ModelTable)
		rows   []plainRow
		want   string
	}{
		{"once each", [][]cdcUnit{{u2}, {u1}}, nil, want, ""},
		{"a unit twice", [][]cdcUnit{{u1}, {u2}, {u1}}, nil, want, "row 0 of unit 0/0/1 2 times"},
		{"a unit missing", [][]cdcUnit{{u1}}, nil, want, "lacks row 0 of acknowledged unit 0/0/2"},
		{"a row nobody acknowledged", [][]cdcUnit{{u1}, {u2}}, nil, want[:3], "which no acknowledged unit has"},
		{"a payload changed", [][]cdcUnit{{u1}, {u2}}, func(tb *postgres.ModelTable) { tb.Rows[0]["payload"] = "x" }, want, "another payload"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := postgres.NewModel()
			for i, units := range c.jobs {
				apply(t, m, fmt.Sprintf("job%d", i), "events", false, units...)
			}
			tb := m.Table("events")
			if c.tamper != nil {
				c.tamper(tb)
			}
			wantBad(t, checkPlainTable("events", tb, c.rows), c.want)
		})
	}
	if got := checkPlainTable("events", nil, nil); len(got) > 0 {
		t.Fatalf("no table, nothing acknowledged: %q", got)
	}
	if !slices.Equal(rowValues(u1.batch, 2), []string{"1", "2", "p1.2"}) {
		t.Fatalf("rowValues %q", rowValues(u1.batch, 2))
	}
}
