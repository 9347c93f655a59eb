package iceberg

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	icego "github.com/apache/iceberg-go"

	"github.com/skipprd/skipprd/engine"
)

// wantRefusal fails t unless err wraps sentinel and engine.ErrCannotApply
// and its message names every one of words.
func wantRefusal(t *testing.T, err, sentinel error, words ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) || !errors.Is(err, engine.ErrCannotApply) {
		t.Fatalf("err = %v, want one wrapping %v and ErrCannotApply", err, sentinel)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("err = %q, want it to name %q", err, w)
		}
	}
	if !strings.HasPrefix(err.Error(), "iceberg: ") {
		t.Fatalf("err = %q, want it prefixed iceberg:", err)
	}
}

// One case per row of IcebergType's table, and per Arrow type our
// sources produce.
func TestIcebergTypeMapping(t *testing.T) {
	cases := []struct {
		arrow arrow.DataType
		want  string
	}{
		{arrow.PrimitiveTypes.Int8, "int"},
		{arrow.PrimitiveTypes.Int16, "int"},
		{arrow.PrimitiveTypes.Int32, "int"},
		{arrow.PrimitiveTypes.Uint8, "int"},
		{arrow.PrimitiveTypes.Uint16, "int"},
		{arrow.PrimitiveTypes.Int64, "long"},
		{arrow.PrimitiveTypes.Uint32, "long"},
		{arrow.PrimitiveTypes.Uint64, "decimal(20, 0)"},
		{arrow.FixedWidthTypes.Float16, "float"},
		{arrow.PrimitiveTypes.Float32, "float"},
		{arrow.PrimitiveTypes.Float64, "double"},
		{arrow.FixedWidthTypes.Boolean, "boolean"},
		{arrow.BinaryTypes.String, "string"},
		{arrow.BinaryTypes.LargeString, "string"},
		{arrow.BinaryTypes.Binary, "binary"},
		{arrow.BinaryTypes.LargeBinary, "binary"},
		{&arrow.FixedSizeBinaryType{ByteWidth: 16}, "fixed[16]"},
		{arrow.FixedWidthTypes.Date32, "date"},
		{arrow.FixedWidthTypes.Date64, "date"},
		{arrow.FixedWidthTypes.Time32s, "time"},
		{arrow.FixedWidthTypes.Time32ms, "time"},
		{arrow.FixedWidthTypes.Time64us, "time"},
		{arrow.FixedWidthTypes.Time64ns, "time"},
		{&arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}, "timestamptz"},
		{&arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "America/New_York"}, "timestamptz"},
		{&arrow.TimestampType{Unit: arrow.Millisecond}, "timestamp"},
		{&arrow.TimestampType{Unit: arrow.Nanosecond}, "timestamp"},
		{&arrow.Decimal128Type{Precision: 38, Scale: 10}, "decimal(38, 10)"},
		{&arrow.Decimal128Type{Precision: 5, Scale: 0}, "decimal(5, 0)"},
		{arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Uint32}, arrow.Field{Name: "b", Type: arrow.BinaryTypes.String}),
			"struct<-1: a: optional long, -1: b: optional string>"},
		{arrow.ListOf(arrow.PrimitiveTypes.Int16), "list<int>"},
		{arrow.LargeListOf(arrow.BinaryTypes.LargeString), "list<string>"},
		{arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Uint64), "map<string, decimal(20, 0)>"},
		{arrow.ListOf(arrow.StructOf(arrow.Field{Name: "x", Type: arrow.FixedWidthTypes.Date64})), "list<struct<-1: x: optional date>>"},
	}
	for _, tc := range cases {
		got, err := IcebergType(tc.arrow)
		if err != nil {
			t.Errorf("%s: %v", tc.arrow, err)
			continue
		}
		if got.String() != tc.want {
			t.Errorf("%s maps to %s, want %s", tc.arrow, got, tc.want)
		}
	}
}

// Nested types get an id per field, element, key and value: -1 until a
// schema assigns them, and all optional but map keys.
func TestIcebergTypeNestedIDs(t *testing.T) {
	got, err := IcebergType(arrow.MapOf(arrow.BinaryTypes.String, arrow.ListOf(arrow.PrimitiveTypes.Int64)))
	if err != nil {
		t.Fatal(err)
	}
	m := got.(*icego.MapType)
	l := m.ValueType.(*icego.ListType)
	if m.KeyID != -1 || m.ValueID != -1 || l.ElementID != -1 || m.ValueRequired || l.ElementRequired {
		t.Fatalf("map %+v, list %+v: want ids -1 and optional values and elements", m, l)
	}
}

// Types without a mapping refuse the job naming the column (the path to
// a nested field) and the type.
func TestIcebergTypeRefuses(t *testing.T) {
	cases := []struct {
		arrow arrow.DataType
		words []string
	}{
		{arrow.SparseUnionOf([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int8}}, []arrow.UnionTypeCode{0}), []string{"sparse_union"}},
		{&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, []string{"dictionary"}},
		{arrow.FixedWidthTypes.Duration_ms, []string{"duration"}},
		{arrow.FixedWidthTypes.MonthInterval, []string{"month_interval"}},
		{arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int32), []string{"fixed_size_list"}},
		{&arrow.Decimal256Type{Precision: 40, Scale: 0}, []string{"decimal256"}},
		{&arrow.Decimal128Type{Precision: 10, Scale: -2}, []string{"scale"}},
		{&arrow.FixedSizeBinaryType{ByteWidth: 0}, []string{"fixed_size_binary[0]"}},
		{arrow.Null, []string{"null"}},
		{arrow.StructOf(), []string{"without fields"}},
		{arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int8}, arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int8}), []string{`two fields are named "a"`}},
		{arrow.ListOf(arrow.FixedWidthTypes.Duration_s), []string{`".element"`, "duration"}},
		{arrow.MapOf(arrow.BinaryTypes.String, arrow.StructOf(arrow.Field{Name: "d", Type: arrow.FixedWidthTypes.DayTimeInterval})),
			[]string{`".value.d"`, "day_time_interval"}},
	}
	for _, tc := range cases {
		_, err := IcebergType(tc.arrow)
		wantRefusal(t, err, ErrUnmappable, tc.words...)
	}
}

// bigSchema has a column of each kind, nested ones too.
var bigSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
	{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	{Name: "attrs", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32), Nullable: true},
	{Name: "who", Type: arrow.StructOf(arrow.Field{Name: "name", Type: arrow.BinaryTypes.String}), Nullable: true},
}, nil)

// A new table's schema: the file's columns in order with fresh ids (in
// iceberg-go's order, depth first), all optional (the non-nullable id
// too), then the partition column the sink adds.
func TestTableSchema(t *testing.T) {
	got, err := TableSchema(bigSchema, PartitionSpec{SourceColumn: PartitionDefault})
	if err != nil {
		t.Fatal(err)
	}
	want := icego.NewSchema(0,
		icego.NestedField{ID: 1, Name: "id", Type: icego.PrimitiveTypes.Int64},
		icego.NestedField{ID: 2, Name: "at", Type: icego.PrimitiveTypes.TimestampTz},
		icego.NestedField{ID: 3, Name: "tags", Type: &icego.ListType{ElementID: 4, Element: icego.PrimitiveTypes.String}},
		icego.NestedField{ID: 5, Name: "attrs", Type: &icego.MapType{KeyID: 6, KeyType: icego.PrimitiveTypes.String, ValueID: 7, ValueType: icego.PrimitiveTypes.Int32}},
		icego.NestedField{ID: 8, Name: "who", Type: &icego.StructType{FieldList: []icego.NestedField{
			{ID: 9, Name: "name", Type: icego.PrimitiveTypes.String}}}},
		icego.NestedField{ID: 10, Name: PartitionDefault, Type: icego.PrimitiveTypes.TimestampTz},
	)
	if !got.Equals(want) {
		t.Fatalf("schema\n%v\nwant\n%v", got, want)
	}

	// A configured partition column of the file's is not added again; one
	// it lacks is, as timestamptz.
	got, err = TableSchema(bigSchema, PartitionSpec{SourceColumn: "at"})
	if err != nil || got.NumFields() != bigSchema.NumFields() {
		t.Fatalf("partitioned by at: %v, %v; want the file's columns only", got, err)
	}
	got, err = TableSchema(bigSchema, PartitionSpec{SourceColumn: "event_time"})
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := got.FindFieldByName("event_time"); !f.Type.Equals(icego.PrimitiveTypes.TimestampTz) || f.Required {
		t.Fatalf("event_time is %v, want an optional timestamptz", f)
	}
}

func TestTableSchemaRefuses(t *testing.T) {
	withIngest := arrow.NewSchema(append(bigSchema.Fields(), arrow.Field{Name: PartitionDefault, Type: arrow.FixedWidthTypes.Timestamp_us}), nil)
	_, err := TableSchema(withIngest, PartitionSpec{SourceColumn: PartitionDefault})
	wantRefusal(t, err, engine.ErrCannotApply, PartitionDefault)

	_, err = TableSchema(bigSchema, PartitionSpec{SourceColumn: "id"})
	wantRefusal(t, err, engine.ErrCannotApply, `"id"`, "int64", "not a timestamp")

	twice := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int8}, {Name: "a", Type: arrow.PrimitiveTypes.Int8}}, nil)
	_, err = TableSchema(twice, PartitionSpec{SourceColumn: PartitionDefault})
	wantRefusal(t, err, engine.ErrCannotApply, `"a"`, "two columns")

	odd := arrow.NewSchema([]arrow.Field{{Name: "ok", Type: arrow.PrimitiveTypes.Int8}, {Name: "span", Type: arrow.FixedWidthTypes.Duration_us}}, nil)
	_, err = TableSchema(odd, PartitionSpec{SourceColumn: PartitionDefault})
	wantRefusal(t, err, ErrUnmappable, `"span"`, "duration")
}

// tableOf is a table schema with columns of the given Iceberg types,
// fresh ids.
func tableOf(t *testing.T, cols ...icego.NestedField) *icego.Schema {
	t.Helper()
	for i := range cols {
		cols[i].ID = -1
	}
	s, err := icego.AssignFreshSchemaIDs(icego.NewSchema(0, cols...), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func col(name string, typ icego.Type) icego.NestedField {
	return icego.NestedField{Name: name, Type: typ}
}

func fileOf(fields ...arrow.Field) *arrow.Schema { return arrow.NewSchema(fields, nil) }

func fld(name string, typ arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: typ, Nullable: true}
}

func TestReconcile(t *testing.T) {
	dec := func(p, s int) icego.Type { return icego.DecimalTypeOf(p, s) }
	person := arrow.StructOf(arrow.Field{Name: "name", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "age", Type: arrow.PrimitiveTypes.Int16})
	personTable := &icego.StructType{FieldList: []icego.NestedField{
		{ID: -1, Name: "name", Type: icego.PrimitiveTypes.String},
		{ID: -1, Name: "age", Type: icego.PrimitiveTypes.Int64},
		{ID: -1, Name: "email", Type: icego.PrimitiveTypes.String},
	}}
	cases := []struct {
		name  string
		table *icego.Schema
		file  *arrow.Schema
		want  Change
	}{
		{"add", tableOf(t, col("a", icego.PrimitiveTypes.Int64)),
			fileOf(fld("a", arrow.PrimitiveTypes.Int64), fld("b", arrow.BinaryTypes.LargeString), fld("u", arrow.PrimitiveTypes.Uint64)),
			Change{Add: []Column{{"b", icego.PrimitiveTypes.String}, {"u", dec(20, 0)}}}},
		{"add nested", tableOf(t, col("a", icego.PrimitiveTypes.Int64)),
			fileOf(fld("l", arrow.ListOf(arrow.PrimitiveTypes.Int8))),
			Change{Add: []Column{{"l", &icego.ListType{ElementID: -1, Element: icego.PrimitiveTypes.Int32}}}}},
		{"widen int to long", tableOf(t, col("a", icego.PrimitiveTypes.Int32)),
			fileOf(fld("a", arrow.PrimitiveTypes.Int64)),
			Change{Widen: []Column{{"a", icego.PrimitiveTypes.Int64}}}},
		{"widen int to long for uint32", tableOf(t, col("a", icego.PrimitiveTypes.Int32)),
			fileOf(fld("a", arrow.PrimitiveTypes.Uint32)),
			Change{Widen: []Column{{"a", icego.PrimitiveTypes.Int64}}}},
		{"widen float to double", tableOf(t, col("f", icego.PrimitiveTypes.Float32)),
			fileOf(fld("f", arrow.PrimitiveTypes.Float64)),
			Change{Widen: []Column{{"f", icego.PrimitiveTypes.Float64}}}},
		{"widen a decimal's precision", tableOf(t, col("d", dec(10, 2))),
			fileOf(fld("d", &arrow.Decimal128Type{Precision: 18, Scale: 2})),
			Change{Widen: []Column{{"d", dec(18, 2)}}}},
		{"holds: same, and wider", tableOf(t,
			col("same", icego.PrimitiveTypes.String),
			col("long", icego.PrimitiveTypes.Int64),
			col("double", icego.PrimitiveTypes.Float64),
			col("u64", dec(20, 0)),
			col("i64", dec(38, 0)),
			col("i32", dec(12, 2)),
			col("dec", dec(20, 6)),
			col("tstz", icego.PrimitiveTypes.TimestampTz),
			col("ts", icego.PrimitiveTypes.Timestamp),
			col("time", icego.PrimitiveTypes.Time),
			col("fixed", icego.FixedTypeOf(4)),
			col("not in the job", icego.PrimitiveTypes.Bool)),
			fileOf(
				fld("same", arrow.BinaryTypes.String),
				fld("long", arrow.PrimitiveTypes.Int32),
				fld("double", arrow.FixedWidthTypes.Float16),
				fld("u64", arrow.PrimitiveTypes.Uint64),
				fld("i64", arrow.PrimitiveTypes.Int64),
				fld("i32", arrow.PrimitiveTypes.Uint16),
				fld("dec", &arrow.Decimal128Type{Precision: 10, Scale: 2}),
				fld("tstz", &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "Europe/Paris"}),
				fld("ts", &arrow.TimestampType{Unit: arrow.Second}),
				fld("time", arrow.FixedWidthTypes.Time32s),
				fld("fixed", &arrow.FixedSizeBinaryType{ByteWidth: 4})),
			Change{}},
		{"nested: the same structure, wider leaves, fewer fields", tableOf(t,
			col("who", personTable),
			col("tags", &icego.ListType{ElementID: -1, Element: icego.PrimitiveTypes.String}),
			col("attrs", &icego.MapType{KeyID: -1, KeyType: icego.PrimitiveTypes.String, ValueID: -1, ValueType: icego.PrimitiveTypes.Float64})),
			fileOf(fld("who", person), fld("tags", arrow.LargeListOf(arrow.BinaryTypes.LargeString)),
				fld("attrs", arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float32))),
			Change{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Reconcile(tc.table, tc.file, "lake.events")
			if err != nil {
				t.Fatal(err)
			}
			if !sameChange(got, tc.want) {
				t.Fatalf("change %+v, want %+v", got, tc.want)
			}
		})
	}
}

func sameChange(a, b Change) bool {
	same := func(x, y []Column) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Name != y[i].Name || !x[i].Type.Equals(y[i].Type) {
				return false
			}
		}
		return true
	}
	return same(a.Add, b.Add) && same(a.Widen, b.Widen)
}

// What the table cannot hold, nor widen to hold, refuses the job naming
// the table, the column, the table's type and the job's.
func TestReconcileRefuses(t *testing.T) {
	personTable := &icego.StructType{FieldList: []icego.NestedField{
		{ID: -1, Name: "name", Type: icego.PrimitiveTypes.String},
		{ID: -1, Name: "age", Type: icego.PrimitiveTypes.Int32},
	}}
	cases := []struct {
		name  string
		table *icego.Schema
		file  *arrow.Schema
		words []string
	}{
		{"string into long", tableOf(t, col("n", icego.PrimitiveTypes.Int64)), fileOf(fld("n", arrow.BinaryTypes.String)),
			[]string{`"lake.events"`, `"n"`, "long", "utf8"}},
		{"long into string", tableOf(t, col("s", icego.PrimitiveTypes.String)), fileOf(fld("s", arrow.PrimitiveTypes.Int64)),
			[]string{`"s"`, "string", "int64"}},
		{"uint64 into long", tableOf(t, col("n", icego.PrimitiveTypes.Int64)), fileOf(fld("n", arrow.PrimitiveTypes.Uint64)),
			[]string{`"n"`, "long", "uint64", "decimal(20, 0)"}},
		{"long into a decimal too short", tableOf(t, col("n", icego.DecimalTypeOf(18, 0))), fileOf(fld("n", arrow.PrimitiveTypes.Int64)),
			[]string{`"n"`, "decimal(18, 0)", "int64"}},
		{"double into long", tableOf(t, col("x", icego.PrimitiveTypes.Int64)), fileOf(fld("x", arrow.PrimitiveTypes.Float64)),
			[]string{`"x"`, "long", "float64"}},
		{"timestamp into timestamptz", tableOf(t, col("at", icego.PrimitiveTypes.TimestampTz)),
			fileOf(fld("at", &arrow.TimestampType{Unit: arrow.Microsecond})), []string{`"at"`, "timestamptz", "timestamp[us]"}},
		{"timestamptz into timestamp", tableOf(t, col("at", icego.PrimitiveTypes.Timestamp)),
			fileOf(fld("at", arrow.FixedWidthTypes.Timestamp_ms)), []string{`"at"`, "timestamp", "tz=UTC"}},
		{"another fixed length", tableOf(t, col("f", icego.FixedTypeOf(16))),
			fileOf(fld("f", &arrow.FixedSizeBinaryType{ByteWidth: 8})), []string{`"f"`, "fixed[16]", "fixed_size_binary[8]"}},
		{"a decimal's scale", tableOf(t, col("d", icego.DecimalTypeOf(10, 2))),
			fileOf(fld("d", &arrow.Decimal128Type{Precision: 12, Scale: 4})), []string{`"d"`, "decimal(10, 2)"}},
		{"a list into a struct", tableOf(t, col("who", personTable)),
			fileOf(fld("who", arrow.ListOf(arrow.BinaryTypes.String))), []string{`"who"`, "struct", "list"}},
		{"a new nested field", tableOf(t, col("who", personTable)),
			fileOf(fld("who", arrow.StructOf(arrow.Field{Name: "name", Type: arrow.BinaryTypes.String}, arrow.Field{Name: "email", Type: arrow.BinaryTypes.String}))),
			[]string{`"who"`, "who.email", "top-level columns only"}},
		{"a nested field to widen", tableOf(t, col("who", personTable)),
			fileOf(fld("who", arrow.StructOf(arrow.Field{Name: "age", Type: arrow.PrimitiveTypes.Int64}))),
			[]string{`"who"`, "who.age", "widen to long"}},
		{"a nested field of another type", tableOf(t, col("tags", &icego.ListType{ElementID: -1, Element: icego.PrimitiveTypes.String})),
			fileOf(fld("tags", arrow.ListOf(arrow.PrimitiveTypes.Int32))), []string{`"tags"`, "tags.element", "string cannot hold int"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Reconcile(tc.table, tc.file, "lake.events")
			wantRefusal(t, err, ErrCannotHold, append(tc.words, `"lake.events"`)...)
		})
	}
	_, err := Reconcile(tableOf(t, col("a", icego.PrimitiveTypes.Int32)), fileOf(fld("u", arrow.FixedWidthTypes.Duration_s)), "lake.events")
	wantRefusal(t, err, ErrUnmappable, `"lake.events"`, `"u"`, "duration")
	_, err = Reconcile(tableOf(t, col("a", icego.PrimitiveTypes.Int32)), fileOf(fld("b", arrow.PrimitiveTypes.Int8), fld("b", arrow.PrimitiveTypes.Int8)), "lake.events")
	wantRefusal(t, err, engine.ErrCannotApply, `"lake.events"`, `"b"`, "two columns")
}
