package postgres

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine"
)

// Column is one destination column: its name and its Postgres type as
// information_schema would print it back (format_type).
type Column struct {
	Name string
	Type string
}

// The columns a CDC table has besides the source's own.
const (
	ColIdentity = "_cdc_identity" // bytea primary key: the event identity
	ColOrder    = "_cdc_order"    // numeric(20,0): the order token the row reflects
	ColDeleted  = "_cdc_deleted"  // boolean: a tombstone (the row was deleted at _cdc_order)
)

// NameBytesMax is Postgres's identifier limit (NAMEDATALEN-1); longer
// names would be truncated silently, so they are refused.
const NameBytesMax = 63

// ColumnsMax is the most columns a Postgres table holds
// (MaxHeapAttributeNumber). A job that would take a table past it is
// refused rather than failed by the server on every retry.
const ColumnsMax = 1600

// AppliedJobsTable is the applied-jobs table: one row per committed job,
// in the same schema as the job tables. No job may write to it.
const AppliedJobsTable = "skipprd_applied_jobs"

// Postgres 15's numeric type modifier limits.
const (
	numericPrecisionMax = 1000
	numericScaleMax     = 1000
)

// cdcColumns are the CDC bookkeeping columns, in table order.
var cdcColumns = []Column{
	{ColIdentity, "bytea"},
	{ColOrder, "numeric(20,0)"},
	{ColDeleted, "boolean"},
}

// PGType maps an Arrow type to the Postgres type its column gets:
//
//	int8, int16, uint8         smallint
//	int32, uint16              integer
//	int64, uint32              bigint
//	uint64                     numeric(20,0)
//	float16, float32           real
//	float64                    double precision
//	bool                       boolean
//	string, large_string       text
//	binary, large_binary,
//	fixed_size_binary          bytea
//	date32, date64             date
//	time32, time64             time without time zone
//	timestamp (with zone)      timestamp with time zone
//	timestamp (without zone)   timestamp without time zone
//	decimal128/256(p, s)       numeric(p,s)   (Postgres 15: |s| ≤ 1000)
//	struct, list, large_list,
//	map                        jsonb          (the array's JSON form)
//
// Any other type (unions, dictionaries, intervals, …) has no mapping and
// the job is refused naming the column.
//
// Values go over unchanged except: time64[ns] and timestamp[ns] are
// rounded down to microseconds (Postgres's resolution), a date64 to its
// day; timestamps without a zone are stored as their UTC wall clock; a
// map is a JSON array of {"key": …, "value": …} objects, and strings
// inside nested values are made valid UTF-8 by the JSON encoding (an
// invalid byte becomes U+FFFD). Values Postgres cannot hold refuse the
// job naming the column and row: text with a NUL byte or invalid UTF-8,
// JSON with a \u0000 escape, a date or timestamp before 4714-11-24 BC
// (or a date after 5874897 AD), a time of day outside 00:00–24:00.
func PGType(t arrow.DataType) (string, bool) {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.UINT8:
		return "smallint", true
	case arrow.INT32, arrow.UINT16:
		return "integer", true
	case arrow.INT64, arrow.UINT32:
		return "bigint", true
	case arrow.UINT64:
		return "numeric(20,0)", true
	case arrow.FLOAT16, arrow.FLOAT32:
		return "real", true
	case arrow.FLOAT64:
		return "double precision", true
	case arrow.BOOL:
		return "boolean", true
	case arrow.STRING, arrow.LARGE_STRING:
		return "text", true
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY:
		return "bytea", true
	case arrow.DATE32, arrow.DATE64:
		return "date", true
	case arrow.TIME32, arrow.TIME64:
		return "time without time zone", true
	case arrow.TIMESTAMP:
		if t.(*arrow.TimestampType).TimeZone != "" {
			return "timestamp with time zone", true
		}
		return "timestamp without time zone", true
	case arrow.DECIMAL128, arrow.DECIMAL256:
		d := t.(arrow.DecimalType)
		p, s := d.GetPrecision(), d.GetScale()
		if p < 1 || p > numericPrecisionMax || s < -numericScaleMax || s > numericScaleMax {
			return "", false
		}
		return fmt.Sprintf("numeric(%d,%d)", p, s), true
	case arrow.STRUCT, arrow.LIST, arrow.LARGE_LIST, arrow.MAP:
		return "jsonb", true
	}
	return "", false
}

// Columns maps an Arrow schema to destination columns, CDC bookkeeping
// first when cdc. A field without a mapping, a name Postgres would
// truncate or reject, a duplicate name, a bookkeeping column's name (in
// any job: a plain table holding _cdc_identity would pass for a CDC one),
// or more than ColumnsMax columns refuses the job: no retry could apply
// it.
func Columns(table string, s *arrow.Schema, cdc bool) ([]Column, error) {
	var cols []Column
	if cdc {
		cols = append(cols, cdcColumns...)
	}
	if len(cols)+s.NumFields() > ColumnsMax {
		return nil, fmt.Errorf("%w: postgres: table %q: %d columns, Postgres holds at most %d", engine.ErrCannotApply, table, len(cols)+s.NumFields(), ColumnsMax)
	}
	seen := map[string]bool{}
	for _, c := range cdcColumns {
		seen[c.Name] = true
	}
	for _, f := range s.Fields() {
		typ, ok := PGType(f.Type)
		switch {
		case !ok:
			return nil, cannotApply(table, f.Name, "Arrow type %s has no Postgres mapping", f.Type)
		case seen[f.Name]:
			return nil, cannotApply(table, f.Name, "the name is used twice (or is a CDC bookkeeping column's)")
		}
		if why := nameProblem(f.Name); why != "" {
			return nil, cannotApply(table, f.Name, "a column name %s", why)
		}
		seen[f.Name] = true
		cols = append(cols, Column{f.Name, typ})
	}
	return cols, nil
}

// nameProblem says why name cannot be a Postgres identifier as it is
// ("" when it can): Postgres truncates names past NameBytesMax bytes and
// rejects NUL bytes and invalid UTF-8 (the sink requires a UTF8 database).
func nameProblem(name string) string {
	switch {
	case name == "" || len(name) > NameBytesMax:
		return fmt.Sprintf("must be 1 to %d bytes, not %d", NameBytesMax, len(name))
	case strings.IndexByte(name, 0) >= 0:
		return "cannot hold a NUL byte"
	case !utf8.ValidString(name):
		return "is not UTF-8"
	}
	return ""
}

// Change is what a table needs before a job can write it: columns to
// add, and columns whose type must widen to hold the job's values.
type Change struct {
	Add, Widen []Column // Widen: the column's name with its new type
}

// Empty reports whether the table needs nothing.
func (c Change) Empty() bool { return len(c.Add) == 0 && len(c.Widen) == 0 }

// Reconcile compares the columns a job writes (want) with the table's
// (have, nil when the table does not exist yet: then every column is to
// add). A column the table lacks is added; a column the table has and the
// job lacks is filled with NULL. Types:
//
//   - the job's values fit the column losslessly (the same type, a
//     smaller integer into a bigger one, real into double precision):
//     nothing to do;
//   - the column's values fit the job's type losslessly (an integer
//     column, then a job with bigint values): the column widens — every
//     value it holds stays exact, and no arrival order of jobs refuses
//     one;
//   - otherwise (text into an integer column, bigint into double
//     precision, …) the job is refused naming the column: no retry can
//     apply it.
//
// A CDC job into a plain table or the reverse (told apart by
// _cdc_identity) is refused, and so is a job that would take the table
// past ColumnsMax columns.
func Reconcile(table string, have, want []Column) (Change, error) {
	if have == nil {
		return Change{Add: want}, nil
	}
	if hasCDC(have) != hasCDC(want) {
		return Change{}, cannotApply(table, ColIdentity, "a CDC job cannot write a plain table, nor a plain job a CDC table (table has the column: %t)", hasCDC(have))
	}
	byName := make(map[string]string, len(have))
	for _, c := range have {
		byName[c.Name] = c.Type
	}
	var ch Change
	for _, c := range want {
		t, ok := byName[c.Name]
		switch {
		case !ok:
			ch.Add = append(ch.Add, c)
		case fits(c.Type, t):
		case fits(t, c.Type):
			ch.Widen = append(ch.Widen, c)
		default:
			return Change{}, cannotApply(table, c.Name, "the job has %s values, the table's column is %s", c.Type, t)
		}
	}
	if n := len(have) + len(ch.Add); len(ch.Add) > 0 && n > ColumnsMax {
		return Change{}, cannotApply(table, ch.Add[len(ch.Add)-1].Name, "adding %d columns would make %d, Postgres holds at most %d", len(ch.Add), n, ColumnsMax)
	}
	return ch, nil
}

// Apply returns have changed by c: widened types, added columns last.
func (c Change) Apply(have []Column) []Column {
	out := slices.Clone(have)
	for _, w := range c.Widen {
		for i := range out {
			if out[i].Name == w.Name {
				out[i].Type = w.Type
			}
		}
	}
	return append(out, c.Add...)
}

// hasCDC reports whether cols include the CDC identity column.
func hasCDC(cols []Column) bool {
	for _, c := range cols {
		if c.Name == ColIdentity {
			return true
		}
	}
	return false
}

// widening lists, for a type, the column types that hold all its values.
var widening = map[string][]string{
	"smallint":      {"integer", "bigint", "numeric(20,0)", "numeric"},
	"integer":       {"bigint", "numeric(20,0)", "numeric"},
	"bigint":        {"numeric(20,0)", "numeric"},
	"numeric(20,0)": {"numeric"},
	"real":          {"double precision"},
}

// fits reports whether values of type job can be stored in a column of
// type col without loss.
func fits(job, col string) bool {
	if job == col {
		return true
	}
	for _, w := range widening[job] {
		if w == col {
			return true
		}
	}
	return false
}

func cannotApply(table, column, format string, args ...any) error {
	return fmt.Errorf("%w: postgres: table %q column %q: %s", engine.ErrCannotApply, table, column, fmt.Sprintf(format, args...))
}
