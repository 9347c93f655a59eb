package iceberg

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/file"
	icego "github.com/apache/iceberg-go"

	"github.com/skipprd/skipprd/sinks"
)

// ids reads the id column of every current file of table ns from disk,
// and checks each file's rows against the count the table records.
func (r *rig) ids(ns string) []int64 {
	r.t.Helper()
	var out []int64
	for _, f := range r.table(ns).Files {
		body, err := os.ReadFile(filepath.Join(r.dir, strings.TrimPrefix(f.Path, "file://"+r.dir)))
		if err != nil {
			r.t.Fatal(err)
		}
		got := idsOf(r.t, body)
		if int64(len(got)) != f.Rows {
			r.t.Fatalf("file %s holds %d rows, the table says %d", f.Path, len(got), f.Rows)
		}
		out = append(out, got...)
	}
	slices.Sort(out)
	return out
}

func idsOf(t *testing.T, body []byte) []int64 {
	t.Helper()
	rec := readBack(t, body)
	defer rec.Release()
	if rec.NumRows() == 0 {
		return nil
	}
	return append([]int64(nil), rec.Column(0).(*array.Int64).Int64Values()...)
}

// wantIDs is the ids of testJob n for every n in ns, sorted.
func wantIDs(ns ...int) []int64 {
	var out []int64
	for _, n := range ns {
		for r := range n {
			out = append(out, int64(n*1000+r))
		}
	}
	slices.Sort(out)
	return out
}

func upTo(n int) []int {
	var out []int
	for i := 1; i <= n; i++ {
		out = append(out, i)
	}
	return out
}

// Every Every commits the sink rewrites a tier of the partition's small
// files into one of the next tier, itself a file a later rewrite may
// take in: every row stays in the table exactly once, the table's file
// count stays bounded, and each rewrite is one "replace" snapshot naming
// its id.
func TestRewriteMergesSmallFiles(t *testing.T) {
	r := newRigSmall(t, 100, SmallFiles{Every: 4, MinFiles: 3})
	for n := 1; n <= 16; n++ {
		r.mustApply(testJob("events", n, schemaIDName))
	}
	// Looks at 4, 8, 12: a job file tier of 4 each time (tier 1: 3
	// files); at 16, tier 1 is due, and goes first (tier 0 holds 4).
	if got := len(r.table("events").Files); got != 5 {
		t.Fatalf("%d files after rewrites of 4, 4, 4 job files and 3 rewrites, want 5", got)
	}
	if got, want := r.ids("events"), wantIDs(upTo(16)...); !slices.Equal(got, want) {
		t.Fatalf("ids %v, want %v", got, want)
	}
	var rewrites []string
	for _, s := range r.table("events").Log {
		if id := s.Summary[SummaryRewriteID]; id != "" {
			rewrites = append(rewrites, s.Summary["operation"]+" of "+s.Summary[SummaryRewriteFiles])
		}
	}
	if !slices.Equal(rewrites, []string{"replace of 4", "replace of 4", "replace of 4", "replace of 3"}) {
		t.Fatalf("rewrite snapshots %v", rewrites)
	}
	tiers := map[int]int{}
	for _, f := range r.table("events").Files {
		tiers[tierOf(f.Path)]++
	}
	if tiers[0] != 4 || tiers[2] != 1 || len(tiers) != 2 {
		t.Fatalf("files by tier %v", tiers)
	}
	if st := r.sink.Stats(); st.Rewritten != 4 || st.RewriteFailed != 0 {
		t.Fatalf("stats %+v", st)
	}
	r.checkOnce("events")
	// A replay of a job whose file was rewritten is found, not added.
	r.mustApply(testJob("events", 5, schemaIDName))
	if got := r.ids("events"); !slices.Equal(got, wantIDs(upTo(16)...)) {
		t.Fatalf("after a replay: ids %v", got)
	}
}

// A rewrite whose commit lands but loses its answer is found landed by
// the look, not committed again.
func TestRewriteAmbiguousLandsOnce(t *testing.T) {
	r := newRigSmall(t, 100, SmallFiles{Every: 3, MinFiles: 3})
	r.model.Decide = faultsOnce(OpRewrite, Ambiguous)
	for n := 1; n <= 3; n++ {
		r.mustApply(testJob("events", n, schemaIDName))
	}
	st := r.sink.Stats()
	if st.Rewritten != 1 || st.RewriteLanded != 1 || len(r.table("events").Files) != 1 {
		t.Fatalf("stats %+v, %d files", st, len(r.table("events").Files))
	}
	if got := r.ids("events"); !slices.Equal(got, wantIDs(1, 2, 3)) {
		t.Fatalf("ids %v", got)
	}
}

// A rewrite that meets another writer's snapshot rebases onto it; one
// that fails outright leaves the files as they were, and the next look
// rewrites them, writing the same merged file again.
func TestRewriteConflictAndFailure(t *testing.T) {
	r := newRigSmall(t, 100, SmallFiles{Every: 3, MinFiles: 3})
	r.model.Decide = faultsOnce(OpRewrite, Conflict)
	for n := 1; n <= 3; n++ {
		r.mustApply(testJob("events", n, schemaIDName))
	}
	if st := r.sink.Stats(); st.Rewritten != 1 || st.RewriteConflicts != 1 {
		t.Fatalf("conflict: stats %+v", st)
	}
	r2 := newRigSmall(t, 100, SmallFiles{Every: 3, MinFiles: 3})
	r2.model.Decide = faultsOnce(OpRewrite, FailAmbiguous)
	for n := 1; n <= 3; n++ {
		r2.mustApply(testJob("events", n, schemaIDName))
	}
	if st := r2.sink.Stats(); st.Rewritten != 0 || st.RewriteFailed != 1 || len(r2.table("events").Files) != 3 {
		t.Fatalf("failed: stats %+v, %d files", st, len(r2.table("events").Files))
	}
	for n := 4; n <= 6; n++ {
		r2.mustApply(testJob("events", n, schemaIDName))
	}
	if st := r2.sink.Stats(); st.Rewritten != 1 || len(r2.table("events").Files) != 1 {
		t.Fatalf("the next look: stats %+v, %d files", st, len(r2.table("events").Files))
	}
	if got := r2.ids("events"); !slices.Equal(got, wantIDs(upTo(6)...)) {
		t.Fatalf("ids %v", got)
	}
}

// Files of two schemas merge into one of every column either has: the
// table's types (an int column since widened to long is cast), nulls
// where a file lacks a column.
func TestRewriteMergesSchemas(t *testing.T) {
	r := newRigSmall(t, 100, SmallFiles{Every: 5, MinFiles: 3})
	narrow := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, nil)
	wide := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	for n := 1; n <= 5; n++ {
		s := narrow
		if n > 3 {
			s = wide
		}
		r.mustApply(testJob("events", n, s))
	}
	mt := r.table("events")
	if len(mt.Files) != 1 || len(mt.Rewritten[mt.Files[0].Path]) != 5 {
		t.Fatalf("%d files (%v), want one rewrite of all 5", len(mt.Files), mt.Rewritten)
	}
	if got := r.ids("events"); !slices.Equal(got, wantIDs(upTo(5)...)) {
		t.Fatalf("ids %v", got)
	}
	body, err := os.ReadFile(filepath.Join(r.dir, strings.TrimPrefix(mt.Files[0].Path, "file://"+r.dir)))
	if err != nil {
		t.Fatal(err)
	}
	rec := readBack(t, body)
	defer rec.Release()
	names := []string{}
	for _, f := range rec.Schema().Fields() {
		names = append(names, f.Name+" "+f.Type.String())
	}
	if !slices.Equal(names, []string{"id int64", "n int64", PartitionDefault + " timestamp[us, tz=UTC]", "score float64"}) {
		t.Fatalf("merged columns %v", names)
	}
	n, score := rec.Column(1).(*array.Int64), rec.Column(3)
	if n.NullN() != 0 || n.Value(0) != 1000 || score.NullN() != 6 || score.IsNull(6) {
		t.Fatalf("n %v, score %v", n, score)
	}
	if st := r.sink.Stats(); st.RewriteSplit != 0 || st.Rewritten != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Inputs that write a column as different Arrow types — a struct whose
// fields differ — are not merged into one file: the plan says so, and
// the merge falls back to the largest group of one schema.
func TestPlanMergeTypesDiffer(t *testing.T) {
	table := icego.NewSchema(0,
		icego.NestedField{ID: 1, Name: "id", Type: icego.PrimitiveTypes.Int64},
		icego.NestedField{ID: 2, Name: "s", Type: &icego.StructType{FieldList: []icego.NestedField{
			{ID: 3, Name: "a", Type: icego.PrimitiveTypes.Int64}, {ID: 4, Name: "b", Type: icego.PrimitiveTypes.Int64}}}})
	field := func(name string, t arrow.DataType, id int) arrow.Field {
		return arrow.Field{Name: name, Type: t, Nullable: true, Metadata: fieldID(id)}
	}
	one := arrow.NewSchema([]arrow.Field{field("id", arrow.PrimitiveTypes.Int64, 1),
		field("s", arrow.StructOf(field("a", arrow.PrimitiveTypes.Int64, 3)), 2)}, nil)
	two := arrow.NewSchema([]arrow.Field{field("id", arrow.PrimitiveTypes.Int64, 1),
		field("s", arrow.StructOf(field("a", arrow.PrimitiveTypes.Int64, 3), field("b", arrow.PrimitiveTypes.Int64, 4)), 2)}, nil)
	if _, _, err := planMerge(table, []*arrow.Schema{one, two}, []int{0, 1}); !errors.Is(err, errTypesDiffer) {
		t.Fatalf("structs of different fields: %v", err)
	}
	if got := largestGroup([]*arrow.Schema{one, two, two}); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("largest group %v", got)
	}
	if _, plans, err := planMerge(table, []*arrow.Schema{one, two, two}, []int{1, 2}); err != nil || len(plans) != 2 {
		t.Fatalf("one schema: %v", err)
	}
}

func TestPlanSmall(t *testing.T) {
	tbl := &Table{Location: "s3://b/lake/t"}
	f := func(name string, day int32, bytes int64) DataFile {
		return DataFile{Path: "s3://b/lake/t/data/" + name, Day: day, Bytes: bytes, Rows: 1}
	}
	p := SmallFiles{MinFiles: 3, SmallBytes: 100, MaxBytes: 150}
	files := []DataFile{
		f("d2-c", 2, 10), f("d2-a", 2, 10), f("d2-b", 2, 10), // day 2: three small
		f("d1-a", 1, 10), f("d1-b", 1, 500), f("d1-c", 1, 10), // day 1: two small, one large
		{Path: "s3://b/elsewhere/x", Day: 2, Bytes: 1},
	}
	got, tier := planSmall(tbl, files, p)
	if tier != 1 {
		t.Fatalf("tier %d", tier)
	}
	if names := paths(got); !slices.Equal(names, []string{"s3://b/lake/t/data/d2-a", "s3://b/lake/t/data/d2-b", "s3://b/lake/t/data/d2-c"}) {
		t.Fatalf("plan %v", names)
	}
	// The oldest day due goes first; MaxBytes cuts it, in path order.
	files = append(files, f("d1-d", 1, 90), f("d1-e", 1, 90))
	if got, _ := planSmall(tbl, files, p); !slices.Equal(paths(got), []string{"s3://b/lake/t/data/d1-a", "s3://b/lake/t/data/d1-c", "s3://b/lake/t/data/d1-d"}) {
		t.Fatalf("plan %v", paths(got))
	}
	// Only files of one tier are merged: the highest tier with enough.
	tiered := []DataFile{f("rewrite-1-aa.parquet", 5, 10), f("rewrite-1-bb.parquet", 5, 10), f("x.parquet", 5, 10),
		f("y.parquet", 5, 10), f("z.parquet", 5, 10), f("rewrite-2-cc.parquet", 5, 10), f("rewrite-1-dd.parquet", 5, 10)}
	if got, tier := planSmall(tbl, tiered, p); tier != 2 || len(got) != 3 || tierOf(got[0].Path) != 1 {
		t.Fatalf("tiered plan %v, tier %d", paths(got), tier)
	}
	if tierOf("s3://b/t/data/rewrite-x-aa.parquet") != 0 || tierOf("s3://b/t/data/rewrite-0-aa.parquet") != 0 || tierOf(rewriteName(7, "ab")+".parquet") != 7 {
		t.Fatal("tierOf")
	}
	if got, _ := planSmall(tbl, files[:3], SmallFiles{MinFiles: 4, SmallBytes: 100, MaxBytes: 150}); got != nil {
		t.Fatalf("fewer than MinFiles: %v", paths(got))
	}
	// The id is the inputs': the same inputs, the same id; others, another.
	a := rewriteID(Ident{"n", "t"}, got)
	if a != rewriteID(Ident{"n", "t"}, got) || a == rewriteID(Ident{"n", "t"}, files[:2]) || a == rewriteID(Ident{"n", "u"}, got) {
		t.Fatal("rewrite ids")
	}
}

func paths(fs []DataFile) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}

// The merged file carries the rewrite's id as its compaction id and
// content (so the create-only write knows a retry's file), and a file
// whose rows are not the table's count stops the rewrite.
func TestMergeFilesMetadataAndCounts(t *testing.T) {
	var bodies [][]byte
	var inputs []DataFile
	var table *icego.Schema
	for n := 1; n <= 3; n++ {
		job := testJob("events", n, schemaIDName)
		fs, err := sinks.FileSchema(job)
		if err != nil {
			t.Fatal(err)
		}
		schema, err := TableSchema(fs, PartitionSpec{SourceColumn: PartitionDefault})
		if err != nil {
			t.Fatal(err)
		}
		table = schema
		files, err := EncodeFiles(job, schema, PartitionSpec{SourceColumn: PartitionDefault}, 0)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, files[0].Body)
		inputs = append(inputs, DataFile{Path: "file:///w/t/data/" + job.ID, Rows: files[0].Rows, Day: files[0].Day})
	}
	id := Ident{"lake", "events"}
	m, err := mergeFiles(id, table, inputs, bodies)
	if err != nil {
		t.Fatal(err)
	}
	if m.file.Rows != 6 || m.id != rewriteID(id, inputs) || !slices.Equal(idsOf(t, m.file.Body), wantIDs(1, 2, 3)) {
		t.Fatalf("merged %d rows, id %s", m.file.Rows, m.id)
	}
	pr, err := file.NewParquetReader(bytes.NewReader(m.file.Body))
	if err != nil {
		t.Fatal(err)
	}
	kv := pr.MetaData().KeyValueMetadata()
	if v := kv.FindValue(sinks.MetaContent); v == nil || *v != m.id {
		t.Fatalf("content %v, want %s", v, m.id)
	}
	pr.Close()
	inputs[1].Rows++
	if _, err := mergeFiles(id, table, inputs, bodies); err == nil || !strings.Contains(err.Error(), "holds 2 rows, the table says 3") {
		t.Fatalf("a count off by one: %v", err)
	}
}
