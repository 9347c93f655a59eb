package iceberg

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	icego "github.com/apache/iceberg-go"

	"github.com/skipprd/skipprd/engine"
)

// IcebergType maps an Arrow type to the Iceberg type of its column:
//
//	Arrow                                    Iceberg
//	int8, int16, int32, uint8, uint16        int
//	int64, uint32                            long
//	uint64                                   decimal(20, 0)
//	float16, float32                         float
//	float64                                  double
//	bool                                     boolean
//	string, large_string                     string
//	binary, large_binary                     binary
//	fixed_size_binary(n), n ≥ 1              fixed[n]
//	date32, date64                           date
//	time32, time64                           time            (µs)
//	timestamp with a zone                    timestamptz     (µs)
//	timestamp without a zone                 timestamp       (µs)
//	decimal128(p, s), p ≤ 38, 0 ≤ s ≤ p      decimal(p, s)
//	struct (≥ 1 field, names unique)         struct          (its fields, in order)
//	list, large_list                         list
//	map                                      map
//
// Any other type (unions, dictionaries, run-end encoded, intervals,
// durations, fixed-size lists, decimal256, extension types, null, …)
// has no mapping: the job is refused naming the column (ErrUnmappable).
// Iceberg has no unsigned types, so each unsigned width goes to the
// next signed one that holds all its values (uint64: decimal(20,0),
// whose 20 digits hold 2^64-1 exactly).
//
// Values go over exactly except: time64[ns] and timestamp[ns] are
// rounded down (toward the past) to microseconds, Iceberg's resolution;
// a date64 to its day (rounded down); time32 and timestamp[s|ms] are
// scaled up to microseconds, and a timestamp beyond ±292,000 years of
// 1970 (past int64 microseconds) refuses the job. A timestamp with any
// zone holds UTC instants (Arrow's meaning), so it is written as
// timestamp[us, tz=UTC]; one without a zone is a wall clock, written as
// it is.
//
// Every field of a nested type gets an id of its own — struct fields,
// list elements, map keys and values — so a table's nested columns can
// evolve by id. Every field is optional (a later job may hold nulls
// where this one does not) except map keys, which Iceberg requires. The
// nested ids of the type returned are -1: unassigned, as iceberg-go's
// AssignFreshSchemaIDs (and UpdateSchema.AddColumn) expect.
//
// (iceberg-go's table.ArrowTypeToIceberg maps otherwise — uint64 to long
// and uint32 to int, which lose values; time32 not at all — so the
// mapping is this package's own.)
func IcebergType(t arrow.DataType) (icego.Type, error) {
	it, err := typeOf("", t)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %w", err)
	}
	return it, nil
}

// Errors of a job the table cannot take, whatever retries: both wrap
// engine.ErrCannotApply, so the engine refuses the job and alerts.
var (
	// ErrUnmappable: a column's Arrow type has no Iceberg type (the
	// table above).
	ErrUnmappable = fmt.Errorf("no Iceberg type holds it (%w)", engine.ErrCannotApply)
	// ErrCannotHold: the table's column has a type that cannot hold the
	// job's values, and cannot be widened to one that does.
	ErrCannotHold = fmt.Errorf("the table's column cannot hold the job's values (%w)", engine.ErrCannotApply)
)

// unmappable is the error for the Arrow type t at path (a column, or a
// field inside one: "a.b", "a.element", "a.key"); callers prefix it.
func unmappable(path string, t arrow.DataType, why string) error {
	if why != "" {
		why = " (" + why + ")"
	}
	return fmt.Errorf("column %q: Arrow type %s%s: %w", path, t, why, ErrUnmappable)
}

// typeOf is IcebergType for the type at path (for messages).
func typeOf(path string, t arrow.DataType) (icego.Type, error) {
	switch t := t.(type) {
	case *arrow.StructType:
		return structOf(path, t)
	case *arrow.ListType, *arrow.LargeListType:
		return listOf(path, t.(arrow.ListLikeType))
	case *arrow.MapType:
		return mapOf(path, t)
	case *arrow.FixedSizeBinaryType:
		if t.ByteWidth < 1 {
			return nil, unmappable(path, t, "Iceberg has no empty fixed type")
		}
		return icego.FixedTypeOf(t.ByteWidth), nil
	case *arrow.Decimal128Type:
		if t.Precision < 1 || t.Precision > 38 || t.Scale < 0 || t.Scale > t.Precision {
			return nil, unmappable(path, t, "an Iceberg decimal has 1 to 38 digits and a scale from 0 to its precision")
		}
		return icego.DecimalTypeOf(int(t.Precision), int(t.Scale)), nil
	case *arrow.TimestampType:
		if t.TimeZone != "" {
			return icego.PrimitiveTypes.TimestampTz, nil
		}
		return icego.PrimitiveTypes.Timestamp, nil
	}
	if p, ok := primitives[t.ID()]; ok {
		return p, nil
	}
	return nil, unmappable(path, t, "")
}

// primitives are the mappings that depend on the Arrow type's id alone.
var primitives = map[arrow.Type]icego.Type{
	arrow.INT8:         icego.PrimitiveTypes.Int32,
	arrow.INT16:        icego.PrimitiveTypes.Int32,
	arrow.INT32:        icego.PrimitiveTypes.Int32,
	arrow.UINT8:        icego.PrimitiveTypes.Int32,
	arrow.UINT16:       icego.PrimitiveTypes.Int32,
	arrow.INT64:        icego.PrimitiveTypes.Int64,
	arrow.UINT32:       icego.PrimitiveTypes.Int64,
	arrow.UINT64:       icego.DecimalTypeOf(20, 0),
	arrow.FLOAT16:      icego.PrimitiveTypes.Float32,
	arrow.FLOAT32:      icego.PrimitiveTypes.Float32,
	arrow.FLOAT64:      icego.PrimitiveTypes.Float64,
	arrow.BOOL:         icego.PrimitiveTypes.Bool,
	arrow.STRING:       icego.PrimitiveTypes.String,
	arrow.LARGE_STRING: icego.PrimitiveTypes.String,
	arrow.BINARY:       icego.PrimitiveTypes.Binary,
	arrow.LARGE_BINARY: icego.PrimitiveTypes.Binary,
	arrow.DATE32:       icego.PrimitiveTypes.Date,
	arrow.DATE64:       icego.PrimitiveTypes.Date,
	arrow.TIME32:       icego.PrimitiveTypes.Time,
	arrow.TIME64:       icego.PrimitiveTypes.Time,
}

func structOf(path string, t *arrow.StructType) (icego.Type, error) {
	if t.NumFields() == 0 {
		return nil, unmappable(path, t, "a struct without fields")
	}
	fields := make([]icego.NestedField, 0, t.NumFields())
	seen := make(map[string]bool, t.NumFields())
	for _, f := range t.Fields() {
		if seen[f.Name] {
			return nil, unmappable(path, t, fmt.Sprintf("two fields are named %q", f.Name))
		}
		seen[f.Name] = true
		ft, err := typeOf(path+"."+f.Name, f.Type)
		if err != nil {
			return nil, err
		}
		fields = append(fields, icego.NestedField{ID: -1, Name: f.Name, Type: ft})
	}
	return &icego.StructType{FieldList: fields}, nil
}

func listOf(path string, t arrow.ListLikeType) (icego.Type, error) {
	elem, err := typeOf(path+".element", t.Elem())
	if err != nil {
		return nil, err
	}
	return &icego.ListType{ElementID: -1, Element: elem}, nil
}

func mapOf(path string, t *arrow.MapType) (icego.Type, error) {
	key, err := typeOf(path+".key", t.KeyType())
	if err != nil {
		return nil, err
	}
	value, err := typeOf(path+".value", t.ItemType())
	if err != nil {
		return nil, err
	}
	return &icego.MapType{KeyID: -1, KeyType: key, ValueID: -1, ValueType: value}, nil
}

// TableSchema is the schema of a new table for a job whose file has
// columns file (sinks.FileSchema: the job's, then its CDC columns): the
// file's columns in order, each optional with its mapped type, then the
// partition column spec.SourceColumn if the file lacks it — timestamptz:
// for the default, _ingested_at, the sink adds it to every row; a
// configured column that a later job brings. Field ids are fresh, 1, 2,
// … in iceberg-go's order (depth first: a nested column's fields follow
// it); the catalog may renumber them when it creates the table.
//
// The file's columns must be unique by name, and the partition column,
// if the file has it, a timestamp (the day transform needs one) and not
// _ingested_at, which the sink writes itself. Errors name the column;
// an unmappable type wraps ErrUnmappable, and all wrap
// engine.ErrCannotApply.
func TableSchema(file *arrow.Schema, spec PartitionSpec) (*icego.Schema, error) {
	if err := checkColumns(file, spec); err != nil {
		return nil, err
	}
	fields := make([]icego.NestedField, 0, file.NumFields()+1)
	for _, f := range file.Fields() {
		t, err := typeOf(f.Name, f.Type)
		if err != nil {
			return nil, fmt.Errorf("iceberg: %w", err)
		}
		fields = append(fields, icego.NestedField{ID: -1, Name: f.Name, Type: t})
	}
	if len(file.FieldIndices(spec.SourceColumn)) == 0 {
		fields = append(fields, icego.NestedField{ID: -1, Name: spec.SourceColumn, Type: icego.PrimitiveTypes.TimestampTz})
	}
	return icego.AssignFreshSchemaIDs(icego.NewSchema(0, fields...), nil)
}

// checkColumns checks what TableSchema and EncodeFiles need of a job's
// file columns besides their types: unique names, and a partition column
// the sink can take the day of (or add).
func checkColumns(file *arrow.Schema, spec PartitionSpec) error {
	if spec.SourceColumn == "" {
		return errors.New("iceberg: the partition spec names no column")
	}
	if err := checkUnique(file); err != nil {
		return fmt.Errorf("iceberg: %w", err)
	}
	i := file.FieldIndices(spec.SourceColumn)
	switch {
	case len(i) == 0:
		return nil
	case spec.SourceColumn == PartitionDefault:
		return fmt.Errorf("iceberg: column %q: the job has a column of the name the sink writes the ingest time to (%w)",
			spec.SourceColumn, engine.ErrCannotApply)
	case file.Field(i[0]).Type.ID() != arrow.TIMESTAMP:
		return fmt.Errorf("iceberg: column %q: the table is partitioned by its day, but its Arrow type is %s, not a timestamp (%w)",
			spec.SourceColumn, file.Field(i[0]).Type, engine.ErrCannotApply)
	}
	return nil
}

// checkUnique refuses a file with two columns of one name: an Iceberg
// schema cannot hold both. Callers prefix its error.
func checkUnique(file *arrow.Schema) error {
	seen := make(map[string]bool, file.NumFields())
	for _, f := range file.Fields() {
		if seen[f.Name] {
			return fmt.Errorf("column %q: the job has two columns of that name (%w)", f.Name, engine.ErrCannotApply)
		}
		seen[f.Name] = true
	}
	return nil
}

// Reconcile is what table (named tableName, for messages) needs to hold
// the columns of a job's file (sinks.FileSchema). By column name:
//
//   - a column the table lacks is added (optional, its mapped type);
//   - a column whose table type holds the job's values exactly — the
//     same type, or a wider one: long holds int, double holds float,
//     decimal(P,S) holds decimal(p,s) when s ≤ S and p-s ≤ P-S, and int
//     (long) when P-S ≥ 10 (19) — needs nothing: the encoder casts;
//   - a column Iceberg can widen to the job's type — int to long, float
//     to double, decimal(P,S) to decimal(p,S) for p > P — is widened:
//     every value it holds stays exact;
//   - anything else (string and long, long and decimal(20,0) — a uint64
//     column —, timestamp and timestamptz, fixed of another length, a
//     struct and a list, …) refuses the job with ErrCannotHold, naming
//     the table, the column, the table's type and the job's.
//
// Nested columns hold when their structure matches field by field (by
// name) and each leaf holds; the table's fields the job lacks are
// fine. A nested field the table lacks, or one that would need
// widening, refuses the job: a Change adds and widens top-level columns
// only (Column has a name, not a path, though iceberg-go's UpdateSchema
// could take one). Table columns the job lacks are fine: its rows hold
// nulls there.
func Reconcile(table *icego.Schema, file *arrow.Schema, tableName string) (Change, error) {
	if err := checkUnique(file); err != nil {
		return Change{}, fmt.Errorf("iceberg: table %q: %w", tableName, err)
	}
	have := topLevel(table)
	var ch Change
	for _, f := range file.Fields() {
		want, err := typeOf(f.Name, f.Type)
		if err != nil {
			return Change{}, fmt.Errorf("iceberg: table %q: %w", tableName, err)
		}
		col, ok := have[f.Name]
		if !ok {
			ch.Add = append(ch.Add, Column{Name: f.Name, Type: want})
			continue
		}
		wide, err := fitColumn(tableName, col.Type, f, want)
		if err != nil {
			return Change{}, err
		}
		if wide != nil {
			ch.Widen = append(ch.Widen, Column{Name: f.Name, Type: wide})
		}
	}
	return ch, nil
}

// topLevel indexes a schema's top-level fields by name (FindFieldByName
// would also find a nested field under a dotted name).
func topLevel(s *icego.Schema) map[string]icego.NestedField {
	out := make(map[string]icego.NestedField, s.NumFields())
	for _, f := range s.Fields() {
		out[f.Name] = f
	}
	return out
}

// fitColumn compares the table's column type have with the job's column
// f (of Iceberg type want): nil if have holds it, the widened type if
// Iceberg can widen have to hold it, else an error wrapping ErrCannotHold.
func fitColumn(table string, have icego.Type, f arrow.Field, want icego.Type) (icego.Type, error) {
	if _, nested := have.(icego.NestedType); nested {
		if err := fitNested(f.Name, have, want); err != nil {
			return nil, fmt.Errorf("iceberg: table %q column %q: the table's type is %s, the job's Arrow type %s: %w",
				table, f.Name, have, f.Type, err)
		}
		return nil, nil
	}
	if holds(have, want) {
		return nil, nil
	}
	if wide, ok := widened(have, want); ok {
		return wide, nil
	}
	return nil, fmt.Errorf("iceberg: table %q column %q: the table's type is %s, the job's Arrow type %s (Iceberg %s): %w",
		table, f.Name, have, f.Type, want, ErrCannotHold)
}

// fitNested checks that the nested type have holds want at path, leaf by
// leaf; its errors wrap ErrCannotHold and say where.
func fitNested(path string, have, want icego.Type) error {
	switch h := have.(type) {
	case *icego.StructType:
		if w, ok := want.(*icego.StructType); ok {
			return fitStruct(path, h, w)
		}
	case *icego.ListType:
		if w, ok := want.(*icego.ListType); ok {
			return fitLeaf(path+".element", h.Element, w.Element)
		}
	case *icego.MapType:
		if w, ok := want.(*icego.MapType); ok {
			if err := fitLeaf(path+".key", h.KeyType, w.KeyType); err != nil {
				return err
			}
			return fitLeaf(path+".value", h.ValueType, w.ValueType)
		}
	}
	return fmt.Errorf("at %s, %s cannot hold %s: %w", path, have, want, ErrCannotHold)
}

func fitStruct(path string, have, want *icego.StructType) error {
	fields := make(map[string]icego.NestedField, len(have.FieldList))
	for _, f := range have.FieldList {
		fields[f.Name] = f
	}
	for _, w := range want.FieldList {
		h, ok := fields[w.Name]
		if !ok {
			return fmt.Errorf("field %s.%s is new, and this sink adds top-level columns only: %w", path, w.Name, ErrCannotHold)
		}
		if err := fitLeaf(path+"."+w.Name, h.Type, w.Type); err != nil {
			return err
		}
	}
	return nil
}

// fitLeaf checks a type inside a nested column, where nothing widens.
func fitLeaf(path string, have, want icego.Type) error {
	if _, nested := have.(icego.NestedType); nested {
		return fitNested(path, have, want)
	}
	if holds(have, want) {
		return nil
	}
	if wide, ok := widened(have, want); ok {
		return fmt.Errorf("at %s, %s would have to widen to %s, and this sink widens top-level columns only: %w", path, have, wide, ErrCannotHold)
	}
	return fmt.Errorf("at %s, %s cannot hold %s: %w", path, have, want, ErrCannotHold)
}

// holds reports whether a column of primitive type have holds every
// value of type want exactly (the encoder casts them).
func holds(have, want icego.Type) bool {
	if have.Equals(want) {
		return true
	}
	hd, isDecimal := have.(icego.DecimalType)
	switch w := want.(type) {
	case icego.Int32Type:
		return have.Equals(icego.PrimitiveTypes.Int64) || isDecimal && hd.Precision()-hd.Scale() >= 10
	case icego.Int64Type:
		return isDecimal && hd.Precision()-hd.Scale() >= 19
	case icego.Float32Type:
		return have.Equals(icego.PrimitiveTypes.Float64)
	case icego.DecimalType:
		return isDecimal && w.Scale() <= hd.Scale() && w.Precision()-w.Scale() <= hd.Precision()-hd.Scale()
	}
	return false
}

// widened is the type Iceberg may widen have to so it holds want (its
// allowed promotions: int to long, float to double, a decimal's
// precision), and whether there is one.
func widened(have, want icego.Type) (icego.Type, bool) {
	switch h := have.(type) {
	case icego.Int32Type:
		return want, want.Equals(icego.PrimitiveTypes.Int64)
	case icego.Float32Type:
		return want, want.Equals(icego.PrimitiveTypes.Float64)
	case icego.DecimalType:
		w, ok := want.(icego.DecimalType)
		return want, ok && w.Scale() == h.Scale() && w.Precision() > h.Precision()
	}
	return nil, false
}
