package postgrescdc

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine/segment"
	pgsink "github.com/skipprd/skipprd/sinks/postgres"
)

// changeID names one change: a row's identity at an order token.
type changeID struct {
	identity string
	order    uint64
}

// lakeState applies every CDC row the lake's sink holds for namespace ns
// with the Postgres sink's rule (pgsink.ApplyChange: the higher order
// token wins, deletes leave tombstones) and returns the live rows by
// identity, rendered by renderRow, and how often each stream change
// (order > 0) appears in the lake.
func (l *lake) state(t *testing.T, ns string) (map[string]string, map[changeID]int) {
	t.Helper()
	rows := map[string]pgsink.RowState{}
	seen := map[changeID]int{}
	for _, job := range l.mem.Applied() {
		if job.Namespace != ns {
			continue
		}
		var cdc []segment.CDCRow
		for _, sc := range job.Sidecars {
			if sc == nil {
				t.Fatalf("job %s of %s carries a slice without a CDC sidecar", job.ID, ns)
			}
			cdc = append(cdc, sc.Rows...)
		}
		i := 0
		for _, b := range job.Batches {
			for r := range int(b.NumRows()) {
				if i >= len(cdc) {
					t.Fatalf("job %s: more Arrow rows than sidecar rows (%d)", job.ID, len(cdc))
				}
				c := cdc[i]
				i++
				if c.Order > 0 {
					seen[changeID{string(c.Identity), c.Order}]++
				}
				id := string(c.Identity)
				cur, ok := rows[id]
				if next, changed := pgsink.ApplyChange(cur, ok, c.Order, c.Kind == segment.Delete, renderValues(b, r)); changed {
					rows[id] = next
				}
			}
		}
		if i != len(cdc) {
			t.Fatalf("job %s: %d Arrow rows, %d sidecar rows", job.ID, i, len(cdc))
		}
	}
	live := map[string]string{}
	for id, r := range rows {
		if !r.Deleted {
			live[id] = strings.Join(r.Values, "|")
		}
	}
	return live, seen
}

// renderValues renders row r of b as "column=value" per column.
func renderValues(b arrow.RecordBatch, r int) []string {
	out := make([]string, b.NumCols())
	for c, col := range b.Columns() {
		out[c] = b.Schema().Field(c).Name + "=" + col.ValueStr(r)
	}
	return out
}

// sourceState reads a table as the source would (its session settings,
// its shape, its Arrow conversion) and returns its rows by identity,
// rendered as the lake's are.
func sourceState(t *testing.T, e *pgEnv, name string) map[string]string {
	t.Helper()
	ctx := context.Background()
	cfg := e.config().withDefaults()
	conn, err := connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	n, err := parseTableName(name)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := readTable(ctx, conn, e.pub, n)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := newShape(n, ct.columns, ct.keyNames)
	if err != nil {
		t.Fatal(err)
	}
	cols := make([]string, len(ct.columns))
	for i, c := range ct.columns {
		cols[i] = `"` + c.name + `"`
	}
	res, err := conn.PgConn().Exec(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+name).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var rows []row
	for _, values := range res[0].Rows {
		id, err := sh.identity(n, values)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row{cdc: segment.CDCRow{Kind: segment.Insert, Identity: id}, values: values})
	}
	b, cdc, err := buildBatch(cfg.Allocator, n, sh, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	out := map[string]string{}
	for i := range cdc {
		out[string(cdc[i].Identity)] = strings.Join(renderValues(b, i), "|")
	}
	return out
}

// diffStates describes how got differs from want (at most a few rows),
// or returns "".
func diffStates(want, got map[string]string) string {
	var d []string
	for id, w := range want {
		if g, ok := got[id]; !ok {
			d = append(d, fmt.Sprintf("missing %q: %s", id, w))
		} else if g != w {
			d = append(d, fmt.Sprintf("row %q: want %s, got %s", id, w, g))
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			d = append(d, fmt.Sprintf("extra %q: %s", id, g))
		}
	}
	sort.Strings(d)
	if len(d) > 8 {
		d = append(d[:8], fmt.Sprintf("… %d differences in all", len(d)))
	}
	return strings.Join(d, "\n")
}
