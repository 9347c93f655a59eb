package postgres

import (
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"pgregory.net/rapid"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// change is one CDC change of the property's streams: a row (v, s) with
// its metadata.
type change struct {
	kind     segment.MutationKind
	identity []byte
	order    uint64
	v        *int64
	s        *string
}

var cdcSchema = arrow.NewSchema([]arrow.Field{
	{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// Random CDC streams over a few identities (inserts, updates, deletes;
// order tokens unique per identity, some above MaxInt64) are cut into
// jobs of one or more slices and batches. A random sequence of those
// jobs — any prefix, any order, duplicates — goes to the real server and
// to Model, and then every job once more: after both phases the real
// table (identity → order, tombstone, values) equals Model's State, and
// at the end it equals applying each change once in order-token order.
func TestPGXCDCMatchesModelProperty(t *testing.T) {
	s := newServer(t, 2)
	defer limitRapidChecks(50)()
	check := 0
	rapid.Check(t, func(rt *rapid.T) {
		check++
		table := fmt.Sprintf("cdc_%d", check)
		stream := drawStream(rt)
		jobs := cutIntoJobs(rt, fmt.Sprintf("c%d", check), table, stream)
		model := NewModel()
		apply := func(j int) {
			tx, err := Plan(jobs[j])
			if err != nil {
				rt.Fatalf("Plan job %d: %v", j, err)
			}
			real, err := s.db.Apply(ctxT(t), tx)
			if err != nil {
				rt.Fatalf("server: apply job %d: %v", j, err)
			}
			modeled, err := model.Apply(ctxT(t), tx)
			if err != nil {
				rt.Fatalf("model: apply job %d: %v", j, err)
			}
			if real != modeled {
				rt.Fatalf("job %d: the server %s it, the model %s", j, real, modeled)
			}
		}
		for _, j := range rapid.SliceOfN(rapid.IntRange(0, len(jobs)-1), 0, 2*len(jobs)).Draw(rt, "replays") {
			apply(j)
		}
		compareStates(rt, "after the replays", readCDCTable(t, s, table), modelState(model, table))
		for _, j := range rapid.Permutation(seq(len(jobs))).Draw(rt, "all") {
			apply(j)
		}
		real := readCDCTable(t, s, table)
		compareStates(rt, "after every job", real, modelState(model, table))
		compareStates(rt, "against order-token order", real, inOrder(stream))
	})
}

// drawStream draws up to 24 changes over at most 4 identities (one of
// them empty), each identity's order tokens distinct.
func drawStream(rt *rapid.T) []change {
	base := rapid.SampledFrom([]uint64{0, math.MaxInt64 - 20, math.MaxUint64 - 60}).Draw(rt, "order base")
	ids := [][]byte{{}, []byte("a"), []byte("b"), {0x00, 0xff}}
	used := map[string]map[uint64]bool{}
	var out []change
	for range rapid.IntRange(1, 24).Draw(rt, "changes") {
		id := ids[rapid.IntRange(0, len(ids)-1).Draw(rt, "identity")]
		order := base + rapid.Uint64Range(0, 60).Draw(rt, "order")
		if used[string(id)][order] {
			continue // tokens are unique per identity
		}
		if used[string(id)] == nil {
			used[string(id)] = map[uint64]bool{}
		}
		used[string(id)][order] = true
		c := change{kind: segment.MutationKind(rapid.IntRange(1, 3).Draw(rt, "kind")), identity: id, order: order}
		if rapid.Bool().Draw(rt, "v set") {
			v := rapid.Int64().Draw(rt, "v")
			c.v = &v
		}
		if rapid.Bool().Draw(rt, "s set") {
			str := rapid.StringMatching(`[a-z]{0,3}`).Draw(rt, "s")
			c.s = &str
		}
		out = append(out, c)
	}
	return out
}

// cutIntoJobs cuts stream into consecutive jobs, each of one to three
// slices, each slice of one or two batches.
func cutIntoJobs(rt *rapid.T, prefix, table string, stream []change) []*engine.Job {
	var jobs []*engine.Job
	for rest := stream; len(rest) > 0; {
		n := rapid.IntRange(1, len(rest)).Draw(rt, "job rows")
		id := fmt.Sprintf("%s-j%d", prefix, len(jobs))
		job := &engine.Job{ID: id, Content: contentOf(id), Origin: testOrigin, SinkRef: "pg", Namespace: table}
		for part := rest[:n]; len(part) > 0; {
			m := rapid.IntRange(1, len(part)).Draw(rt, "slice rows")
			job.Slices = append(job.Slices, cdcSlice(rt, part[:m]))
			part = part[m:]
		}
		jobs = append(jobs, job)
		rest = rest[n:]
	}
	return jobs
}

func cdcSlice(rt *rapid.T, changes []change) *segment.Slice {
	sl := &segment.Slice{Entry: segment.IndexEntry{Rows: int64(len(changes))}, Schema: cdcSchema, Sidecar: &segment.Sidecar{}}
	cut := rapid.IntRange(0, len(changes)).Draw(rt, "batch cut")
	for _, part := range [][]change{changes[:cut], changes[cut:]} {
		if len(part) == 0 {
			continue
		}
		b := array.NewRecordBuilder(memory.DefaultAllocator, cdcSchema)
		for _, c := range part {
			if c.v == nil {
				b.Field(0).AppendNull()
			} else {
				b.Field(0).(*array.Int64Builder).Append(*c.v)
			}
			if c.s == nil {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.StringBuilder).Append(*c.s)
			}
			sl.Sidecar.Rows = append(sl.Sidecar.Rows, segment.CDCRow{Kind: c.kind, Identity: c.identity, Order: c.order})
		}
		sl.Batches = append(sl.Batches, b.NewRecordBatch())
		b.Release()
	}
	return sl
}

// rowText is how Model renders a value (arrow's ValueStr).
func rowText[T any](p *T) string {
	if p == nil {
		return "(null)"
	}
	return fmt.Sprint(*p)
}

// inOrder is the table applying each change once in order-token order
// gives: per identity, the change with the greatest token.
func inOrder(stream []change) map[string]RowState {
	out := map[string]RowState{}
	for _, c := range stream {
		key := hex.EncodeToString(c.identity)
		if cur, ok := out[key]; ok && cur.Order > c.order {
			continue
		}
		out[key] = RowState{Order: c.order, Deleted: c.kind == segment.Delete, Values: []string{rowText(c.v), rowText(c.s)}}
	}
	return out
}

// modelState is Model's table by hex identity (empty if none).
func modelState(m *Model, table string) map[string]RowState {
	out := map[string]RowState{}
	if mt := m.Table(table); mt != nil {
		for id, st := range mt.State {
			out[hex.EncodeToString([]byte(id))] = st
		}
	}
	return out
}

// readCDCTable is the server's table by hex identity (empty if none).
func readCDCTable(t testing.TB, s *server, table string) map[string]RowState {
	out := map[string]RowState{}
	if s.count(t, "SELECT count(*) FROM pg_class WHERE relname = $1", table) == 0 {
		return out
	}
	rows := s.texts(t, fmt.Sprintf(`SELECT encode(_cdc_identity, 'hex'), _cdc_order::text, _cdc_deleted::text,
		coalesce(v::text, '(null)'), coalesce(s, '(null)') FROM %s`, quote(table)))
	for _, r := range rows {
		var order uint64
		if _, err := fmt.Sscan(r[1], &order); err != nil {
			t.Fatalf("order token %q: %v", r[1], err)
		}
		out[r[0]] = RowState{Order: order, Deleted: r[2] == "true", Values: []string{r[3], r[4]}}
	}
	return out
}

func compareStates(rt *rapid.T, when string, got, want map[string]RowState) {
	if !reflect.DeepEqual(got, want) {
		rt.Fatalf("%s: the server holds\n%v\nwant\n%v", when, got, want)
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// limitRapidChecks sets -rapid.checks to n unless the command line set
// it, and returns the function that restores it: each check here costs
// a few transactions on the server.
func limitRapidChecks(n int) (restore func()) {
	f := flag.Lookup("rapid.checks")
	set := false
	flag.Visit(func(v *flag.Flag) { set = set || v.Name == "rapid.checks" })
	if f == nil || set {
		return func() {}
	}
	old := f.Value.String()
	_ = f.Value.Set(fmt.Sprint(n))
	return func() { _ = f.Value.Set(old) }
}
