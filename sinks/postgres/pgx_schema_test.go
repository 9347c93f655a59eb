package postgres

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// A job with a new column widens the table (ALTER TABLE ADD COLUMN) and
// the rows before it read NULL there; a job whose values fit a wider
// column (integer into bigint) lands without DDL.
func TestPGXSchemaEvolution(t *testing.T) {
	s := newServer(t, 2)
	s.mustApply(t, plainJob("j1", "evo", int64Batch(t, []string{"a"}, [][]*int64{{i64(1)}, {i64(2)}})))
	s.mustApply(t, plainJob("j2", "evo", int64Batch(t, []string{"a", "b"}, [][]*int64{{i64(3), i64(30)}})))
	if got, want := s.columnTypes(t, "evo"), map[string]string{"a": "bigint", "b": "bigint"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("columns %v, want %v", got, want)
	}

	narrow := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int32}}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, narrow)
	defer rb.Release()
	rb.Field(0).(*array.Int32Builder).Append(4)
	s.mustApply(t, plainJob("j3", "evo", rb.NewRecordBatch()))

	got := s.texts(t, "SELECT a::text, b::text FROM evo ORDER BY a")
	want := [][]string{{"1", "NULL"}, {"2", "NULL"}, {"3", "30"}, {"4", "NULL"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if got := s.columnTypes(t, "evo")["a"]; got != "bigint" {
		t.Fatalf("column a became %s", got)
	}
}

// A job whose column has another, incompatible type is refused naming
// the table and the column, and nothing of it is written: not its rows,
// not its other new column, not its applied-jobs row. A retry is refused
// the same way.
func TestPGXSchemaConflictWritesNothing(t *testing.T) {
	s := newServer(t, 2)
	s.mustApply(t, plainJob("j1", "conflict", int64Batch(t, []string{"a"}, [][]*int64{{i64(1)}})))

	schema := arrow.NewSchema([]arrow.Field{
		{Name: "c", Type: arrow.PrimitiveTypes.Int64},
		{Name: "a", Type: arrow.BinaryTypes.String},
	}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	rb.Field(0).(*array.Int64Builder).Append(7)
	rb.Field(1).(*array.StringBuilder).Append("x")
	job := plainJob("j2", "conflict", rb.NewRecordBatch())
	for attempt := range 2 {
		err := s.apply(t, job)
		wantCannotApply(t, err, `"conflict"`, `"a"`, "text", "bigint")
		if n := s.appliedRows(t, "j2"); n != 0 {
			t.Fatalf("attempt %d: %d applied-jobs rows for the refused job", attempt, n)
		}
	}
	if got, want := s.columnTypes(t, "conflict"), map[string]string{"a": "bigint"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("columns %v, want %v (the refused job's column c must not be added)", got, want)
	}
	if n := s.count(t, "SELECT count(*) FROM conflict"); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

// A CDC job into a plain table (and the reverse) is refused by the real
// server and by the model alike, naming _cdc_identity.
func TestPGXCDCAndPlainDoNotMix(t *testing.T) {
	s := newServer(t, 2)
	model := NewModel()
	plain := plainJob("plain", "mixed", int64Batch(t, []string{"a"}, [][]*int64{{i64(1)}}))
	cdc := cdcJob("cdc", "mixed", []segment.CDCRow{{Kind: segment.Insert, Identity: []byte("k"), Order: 1}},
		int64Batch(t, []string{"a"}, [][]*int64{{i64(2)}}))
	applyBoth := func(job *engine.Job) (real, modeled error) {
		tx, err := Plan(job)
		if err != nil {
			t.Fatalf("Plan: %v", err)
		}
		_, real = s.db.Apply(ctxT(t), tx)
		_, modeled = model.Apply(ctxT(t), tx)
		return real, modeled
	}
	if r, m := applyBoth(plain); r != nil || m != nil {
		t.Fatalf("plain job: server %v, model %v", r, m)
	}
	r, m := applyBoth(cdc)
	wantCannotApply(t, r, ColIdentity)
	wantCannotApply(t, m, ColIdentity)

	other := cdcJob("cdc2", "mixed_cdc", []segment.CDCRow{{Kind: segment.Insert, Identity: []byte("k"), Order: 1}},
		int64Batch(t, []string{"a"}, [][]*int64{{i64(2)}}))
	if r, m := applyBoth(other); r != nil || m != nil {
		t.Fatalf("CDC job: server %v, model %v", r, m)
	}
	r, m = applyBoth(plainJob("plain2", "mixed_cdc", int64Batch(t, []string{"a"}, [][]*int64{{i64(1)}})))
	wantCannotApply(t, r, ColIdentity)
	wantCannotApply(t, m, ColIdentity)
}

// Jobs that all need the same DDL at once — creating one table, then
// adding one column — all commit: the table's advisory lock makes each
// find the other's work instead of failing on "already exists".
func TestPGXConcurrentDDL(t *testing.T) {
	const jobs = 6
	s := newServer(t, jobs)
	for round, cols := range [][]string{{"a"}, {"a", "b"}} {
		var wg sync.WaitGroup
		errs := make([]error, jobs)
		for j := range jobs {
			wg.Go(func() {
				row := []*int64{i64(1), i64(2)}[:len(cols)]
				job := plainJob(fmt.Sprintf("r%d-j%d", round, j), "ddl", int64Batch(t, cols, [][]*int64{row}))
				errs[j] = s.apply(t, job)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if n := s.count(t, "SELECT count(*) FROM ddl"); n != 2*jobs {
		t.Fatalf("%d rows, want %d", n, 2*jobs)
	}
	if n := s.count(t, "SELECT count(*) FROM ddl WHERE b = 2"); n != jobs {
		t.Fatalf("%d rows with b, want %d", n, jobs)
	}
}

// Values Postgres cannot hold refuse the job naming the column and the
// row (a retry could never store them), and nothing is written.
func TestPGXRefusesValuesPostgresCannotHold(t *testing.T) {
	s := newServer(t, 2)
	cases := []struct {
		name  string
		typ   arrow.DataType
		build func(b array.Builder) // appends a good value, then the bad one
		why   string
	}{
		{"nul_text", arrow.BinaryTypes.String, func(b array.Builder) { b.(*array.StringBuilder).AppendValues([]string{"ok", "a\x00b"}, nil) }, "NUL"},
		{"bad_utf8", arrow.BinaryTypes.String, func(b array.Builder) { b.(*array.StringBuilder).AppendValues([]string{"ok", "\xff"}, nil) }, "UTF-8"},
		{"date_early", arrow.FixedWidthTypes.Date32, func(b array.Builder) { b.(*array.Date32Builder).AppendValues([]arrow.Date32{0, -2440589}, nil) }, "range"},
		{"date_late", arrow.FixedWidthTypes.Date32, func(b array.Builder) { b.(*array.Date32Builder).AppendValues([]arrow.Date32{0, 2145042906}, nil) }, "range"},
		{"time_late", arrow.FixedWidthTypes.Time32ms, func(b array.Builder) { b.(*array.Time32Builder).AppendValues([]arrow.Time32{0, 86400001}, nil) }, "24:00"},
		{"time_negative", arrow.FixedWidthTypes.Time64ns, func(b array.Builder) { b.(*array.Time64Builder).AppendValues([]arrow.Time64{0, -1}, nil) }, "24:00"},
		{"ts_early", tsUTC, func(b array.Builder) {
			b.(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{0, -210866803201}, nil)
		}, "range"},
		{"ts_overflow", tsUTC, func(b array.Builder) { b.(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{0, 1 << 62}, nil) }, "range"},
		{"json_nul", arrow.ListOf(arrow.BinaryTypes.String), func(b array.Builder) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.StringBuilder).Append("ok")
			lb.Append(true)
			lb.ValueBuilder().(*array.StringBuilder).Append("x\x00")
		}, "NUL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			schema := arrow.NewSchema([]arrow.Field{{Name: c.name, Type: c.typ}}, nil)
			rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			defer rb.Release()
			c.build(rb.Field(0))
			err := s.apply(t, plainJob("j-"+c.name, "t_"+c.name, rb.NewRecordBatch()))
			wantCannotApply(t, err, fmt.Sprintf("%q", c.name), "row 1", c.why)
			if n := s.appliedRows(t, "j-"+c.name); n != 0 {
				t.Fatalf("%d applied-jobs rows", n)
			}
			if n := s.count(t, "SELECT count(*) FROM pg_class WHERE relname = $1", "t_"+c.name); n != 0 {
				t.Fatalf("the table was created")
			}
		})
	}
}

// Values of a narrower type go into a table's wider column (smallint into
// bigint, real into double precision), by COPY and by the CDC upsert.
func TestPGXWidening(t *testing.T) {
	s := newServer(t, 2)
	wide := arrow.NewSchema([]arrow.Field{{Name: "i", Type: arrow.PrimitiveTypes.Int64}, {Name: "r", Type: arrow.PrimitiveTypes.Float64}}, nil)
	narrow := arrow.NewSchema([]arrow.Field{{Name: "i", Type: arrow.PrimitiveTypes.Int16}, {Name: "r", Type: arrow.PrimitiveTypes.Float32}}, nil)
	batch := func(schema *arrow.Schema, i int64, r float64) arrow.RecordBatch {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer rb.Release()
		switch b := rb.Field(0).(type) {
		case *array.Int64Builder:
			b.Append(i)
		case *array.Int16Builder:
			b.Append(int16(i))
		}
		switch b := rb.Field(1).(type) {
		case *array.Float64Builder:
			b.Append(r)
		case *array.Float32Builder:
			b.Append(float32(r))
		}
		return rb.NewRecordBatch()
	}
	k := []segment.CDCRow{{Kind: segment.Insert, Identity: []byte("k"), Order: 1}}
	k2 := []segment.CDCRow{{Kind: segment.Update, Identity: []byte("k"), Order: 2}}
	s.mustApply(t, plainJob("p1", "wide", batch(wide, 1, 0.5)))
	s.mustApply(t, plainJob("p2", "wide", batch(narrow, -2, 1.25)))
	s.mustApply(t, cdcJob("c1", "wide_cdc", k, batch(wide, 1, 0.5)))
	s.mustApply(t, cdcJob("c2", "wide_cdc", k2, batch(narrow, -2, 1.25)))
	if got := s.texts(t, "SELECT i::text, r::text FROM wide ORDER BY i"); !reflect.DeepEqual(got, [][]string{{"-2", "1.25"}, {"1", "0.5"}}) {
		t.Fatalf("plain: %v", got)
	}
	if got := s.texts(t, "SELECT i::text, r::text FROM wide_cdc"); !reflect.DeepEqual(got, [][]string{{"-2", "1.25"}}) {
		t.Fatalf("cdc: %v", got)
	}
	// The other arrival order: the narrow job creates the table, and the
	// wide one widens its columns instead of being refused for good.
	s.mustApply(t, plainJob("n1", "narrow", batch(narrow, 3, 0.25)))
	s.mustApply(t, plainJob("n2", "narrow", batch(wide, 1<<40, 1e300)))
	s.mustApply(t, cdcJob("m1", "narrow_cdc", k, batch(narrow, 3, 0.25)))
	s.mustApply(t, cdcJob("m2", "narrow_cdc", k2, batch(wide, 1<<40, 1e300)))
	if got := s.texts(t, "SELECT i::text, r::text FROM narrow ORDER BY i"); !reflect.DeepEqual(got, [][]string{{"1099511627776", "1e+300"}, {"3", "0.25"}}) {
		t.Fatalf("plain, widened: %v", got)
	}
	if got := s.texts(t, "SELECT i::text, r::text FROM narrow_cdc"); !reflect.DeepEqual(got, [][]string{{"1099511627776", "1e+300"}}) {
		t.Fatalf("cdc, widened: %v", got)
	}
	for _, table := range []string{"wide", "wide_cdc", "narrow", "narrow_cdc"} {
		if got := s.columnTypes(t, table); got["i"] != "bigint" || got["r"] != "double precision" {
			t.Fatalf("%s: columns %v", table, got)
		}
	}
}
