package postgres

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// Plan refuses table names Postgres would truncate or reject, and the
// applied-jobs table's own name; NameBytesMax bytes pass.
func TestPlanTableNames(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{strings.Repeat("t", NameBytesMax), true},
		{"Mixed Case-and spaces", true},
		{strings.Repeat("t", NameBytesMax+1), false},
		{"a\x00b", false},
		{"\xff", false},
		{AppliedJobsTable, false},
	} {
		job := plainJob("j", c.name, int64Batch(t, []string{"a"}, [][]*int64{{i64(1)}}))
		_, err := Plan(job)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, engine.ErrCannotApply)) {
			t.Errorf("table %q: Plan err %v, want ok=%t", c.name, err, c.ok)
		}
	}
}

// Plan refuses a CDC identity longer than IdentityBytesMax, naming the
// slice and row.
func TestPlanIdentityLength(t *testing.T) {
	for _, n := range []int{IdentityBytesMax, IdentityBytesMax + 1} {
		rows := []segment.CDCRow{{Kind: segment.Insert, Identity: []byte("k"), Order: 1}, {Kind: segment.Insert, Identity: make([]byte, n), Order: 1}}
		job := cdcJob("j", "t", rows, int64Batch(t, []string{"a"}, [][]*int64{{i64(1)}, {i64(2)}}))
		_, err := Plan(job)
		if n <= IdentityBytesMax {
			if err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
			continue
		}
		wantCannotApply(t, err, "slice 0 (ordinal 0) row 1", fmt.Sprint(n))
	}
}

// Columns refuses the CDC bookkeeping names in plain jobs too (a plain
// table holding _cdc_identity would pass for a CDC one), invalid names,
// and more than ColumnsMax columns.
func TestColumnsRefusals(t *testing.T) {
	field := func(name string) arrow.Field { return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64} }
	for _, c := range []struct {
		desc   string
		fields []arrow.Field
		cdc    bool
		word   string
	}{
		{"bookkeeping name, plain", []arrow.Field{field(ColOrder)}, false, ColOrder},
		{"bookkeeping name, cdc", []arrow.Field{field(ColDeleted)}, true, ColDeleted},
		{"duplicate", []arrow.Field{field("a"), field("a")}, false, "twice"},
		{"long name", []arrow.Field{field(strings.Repeat("x", NameBytesMax+1))}, false, "64"},
		{"not UTF-8", []arrow.Field{field("\xfe")}, false, "UTF-8"},
		{"too many", func() []arrow.Field {
			fs := make([]arrow.Field, ColumnsMax-2)
			for i := range fs {
				fs[i] = field(fmt.Sprint("c", i))
			}
			return fs
		}(), true, "1601"},
	} {
		_, err := Columns("t", arrow.NewSchema(c.fields, nil), c.cdc)
		if !errors.Is(err, engine.ErrCannotApply) || !strings.Contains(err.Error(), c.word) {
			t.Errorf("%s: err %v, want ErrCannotApply naming %q", c.desc, err, c.word)
		}
	}
}

// Reconcile: new columns are added, values that fit pass, a column whose
// values fit the job's type widens, other type changes, CDC-ness changes
// and going past ColumnsMax are refused.
func TestReconcile(t *testing.T) {
	cdc := append([]Column{}, cdcColumns...)
	for _, c := range []struct {
		desc       string
		have, want []Column
		add, widen []Column
		refuse     string // the column the refusal names; "" if none
	}{
		{"new table", nil, []Column{{"a", "text"}}, []Column{{"a", "text"}}, nil, ""},
		{"same", []Column{{"a", "text"}}, []Column{{"a", "text"}}, nil, nil, ""},
		{"new column", []Column{{"a", "text"}}, []Column{{"a", "text"}, {"b", "bigint"}}, []Column{{"b", "bigint"}}, nil, ""},
		{"job lacks a column", []Column{{"a", "text"}, {"b", "bigint"}}, []Column{{"b", "bigint"}}, nil, nil, ""},
		{"integer into bigint", []Column{{"a", "bigint"}}, []Column{{"a", "integer"}}, nil, nil, ""},
		{"real into double", []Column{{"a", "double precision"}}, []Column{{"a", "real"}}, nil, nil, ""},
		{"bigint widens integer", []Column{{"a", "integer"}, {"b", "text"}}, []Column{{"a", "bigint"}, {"c", "real"}}, []Column{{"c", "real"}}, []Column{{"a", "bigint"}}, ""},
		{"uint64 widens smallint", []Column{{"a", "smallint"}}, []Column{{"a", "numeric(20,0)"}}, nil, []Column{{"a", "numeric(20,0)"}}, ""},
		{"double widens real", []Column{{"a", "real"}}, []Column{{"a", "double precision"}}, nil, []Column{{"a", "double precision"}}, ""},
		{"bigint into double", []Column{{"a", "double precision"}}, []Column{{"a", "bigint"}}, nil, nil, "a"},
		{"double into bigint", []Column{{"a", "bigint"}}, []Column{{"a", "double precision"}}, nil, nil, "a"},
		{"text into bigint", []Column{{"a", "bigint"}}, []Column{{"a", "text"}}, nil, nil, "a"},
		{"cdc into plain", []Column{{"a", "text"}}, append(cdc, Column{"a", "text"}), nil, nil, ColIdentity},
		{"plain into cdc", append(cdc, Column{"a", "text"}), []Column{{"a", "text"}}, nil, nil, ColIdentity},
	} {
		ch, err := Reconcile("t", c.have, c.want)
		if c.refuse != "" {
			if !errors.Is(err, engine.ErrCannotApply) || !strings.Contains(err.Error(), fmt.Sprintf("%q", c.refuse)) {
				t.Errorf("%s: err %v, want a refusal naming %q", c.desc, err, c.refuse)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(ch.Add, c.add) || !reflect.DeepEqual(ch.Widen, c.widen) {
			t.Errorf("%s: add %v widen %v, err %v; want %v and %v", c.desc, ch.Add, ch.Widen, err, c.add, c.widen)
		}
	}
	have := make([]Column, ColumnsMax)
	for i := range have {
		have[i] = Column{fmt.Sprint("c", i), "bigint"}
	}
	if _, err := Reconcile("t", have, []Column{{"one_more", "bigint"}}); !errors.Is(err, engine.ErrCannotApply) {
		t.Errorf("column %d: err %v, want a refusal", ColumnsMax+1, err)
	}
}

// knownType accepts every type PGType produces and nothing that could
// smuggle SQL into DDL.
func TestKnownType(t *testing.T) {
	for _, c := range typeCases() {
		if !knownType(c.pgType) {
			t.Errorf("%s: knownType(%q) = false", c.name, c.pgType)
		}
	}
	for _, bad := range []string{"", "numeric", "numeric(10,2); DROP TABLE x", "numeric(0,0)", "numeric(1001,0)",
		"numeric(5,1001)", "numeric( 5,2)", "numeric(05,2)", "text NOT NULL", "integer[]"} {
		if knownType(bad) {
			t.Errorf("knownType(%q) = true", bad)
		}
	}
	if _, ok := PGType(&arrow.Decimal128Type{Precision: 10, Scale: 1001}); ok {
		t.Errorf("PGType maps a decimal of scale 1001")
	}
}
