package sim

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
)

// evolving is an HTTP source whose units rotate Arrow, JSON lines and
// CSV and carry both optional fields.
func evolving() SourceSpec {
	return SourceSpec{Name: "web", InFlight: 2, RowsMin: 3, RowsMax: 9, Encoding: EncodingMixed3, ExtraField: true, WidenField: true}
}

// findShape returns the first unit of spec, from seq 1 on, whose shape is
// want.
func findShape(t *testing.T, spec SourceSpec, want unitShape) UID {
	t.Helper()
	for seq := uint64(1); seq < 1000; seq++ {
		if uid := makeUID(0, 0, seq); shapeOf(spec, uid) == want {
			return uid
		}
	}
	t.Fatalf("no unit of shape %+v", want)
	return 0
}

func digestOf(t *testing.T, b arrow.RecordBatch) RowDigest {
	t.Helper()
	var d RowDigest
	if err := d.AddBatch(b, nil); err != nil {
		t.Fatal(err)
	}
	return d
}

// Shapes are drawn from the spec: none for Arrow units or sources that
// do not evolve, every kind for an evolving one; a plain unit digests as
// before optional fields existed.
func TestShapes(t *testing.T) {
	spec := evolving()
	seen := map[unitShape]bool{}
	for seq := uint64(1); seq <= 300; seq++ {
		uid := makeUID(0, 0, seq)
		s := shapeOf(spec, uid)
		if encodingOf(spec, uid) == EncodingArrow && !s.plain() {
			t.Fatalf("unit %s goes as Arrow with shape %+v", uid, s)
		}
		seen[s] = true
	}
	if len(seen) != 6 { // plain, tag; each with no, int or float score
		t.Fatalf("shapes seen: %v", seen)
	}
	if s := shapeOf(SourceSpec{InFlight: 1, Encoding: EncodingMixed3}, makeUID(0, 0, 1)); !s.plain() {
		t.Fatalf("a source that does not evolve has shape %+v", s)
	}
	uid := makeUID(0, 0, 7)
	plain := unitBatch(spec, uid, 4)
	defer plain.Release()
	plain.Retain()
	if same := withShape(plain, uid, unitShape{}); same != plain || digestOf(t, same) != digestOf(t, plain) {
		t.Fatal("a plain shape changed the batch")
	}
}

// The digest covers the optional fields: a changed tag, a tag made
// null, a zip without its leading zero, or a score of another type all
// digest differently.
func TestShapeDigest(t *testing.T) {
	spec := evolving()
	uid := findShape(t, spec, unitShape{tag: true, score: scoreFloat})
	b, _ := unitContent(spec, uid)
	defer b.Release()
	base := digestOf(t, b)
	for name, edit := range map[string]func(arrow.Array) arrow.Array{
		"tag changed": func(a arrow.Array) arrow.Array {
			return editInt64(a, func(v int64, _ bool) (int64, bool) { return v + 1, true })
		},
		"tag nulled": func(a arrow.Array) arrow.Array {
			return editInt64(a, func(v int64, _ bool) (int64, bool) { return v, false })
		},
	} {
		if d := digestOf(t, replaceColumn(b, fieldTag, edit)); d == base {
			t.Errorf("%s: same digest", name)
		}
	}
	unzipped := replaceColumn(b, fieldZip, func(a arrow.Array) arrow.Array {
		sb := array.NewStringBuilder(memory.DefaultAllocator)
		defer sb.Release()
		for i := range a.Len() {
			sb.Append(strings.TrimLeft(a.(*array.String).Value(i), "0"))
		}
		return sb.NewArray()
	})
	if digestOf(t, unzipped) == base {
		t.Error("zip without its leading zero: same digest")
	}
	asInt := replaceColumn(b, fieldScore, func(a arrow.Array) arrow.Array {
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		defer ib.Release()
		for i := range a.Len() {
			ib.Append(int64(a.(*array.Float64).Value(i)))
		}
		return ib.NewArray()
	})
	if digestOf(t, asInt) == base {
		t.Error("score as int64: same digest")
	}
}

// replaceColumn returns b with column name replaced by edit's array.
func replaceColumn(b arrow.RecordBatch, name string, edit func(arrow.Array) arrow.Array) arrow.RecordBatch {
	i := b.Schema().FieldIndices(name)[0]
	cols := append([]arrow.Array(nil), b.Columns()...)
	cols[i] = edit(cols[i])
	fields := b.Schema().Fields()
	fields[i].Type = cols[i].DataType()
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, b.NumRows())
}

func editInt64(a arrow.Array, f func(int64, bool) (int64, bool)) arrow.Array {
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	defer ib.Release()
	in := a.(*array.Int64)
	for i := range in.Len() {
		if v, ok := f(in.Value(i), in.IsValid(i)); ok {
			ib.Append(v)
		} else {
			ib.AppendNull()
		}
	}
	return ib.NewArray()
}

// A segment holding a unit whose optional field differs from what its
// source produced fails the unit's digest; the unit as produced passes.
func TestOracleOptionalFields(t *testing.T) {
	spec := evolving()
	uid := findShape(t, spec, unitShape{tag: true, score: scoreInt})
	run := func(edit bool) *World {
		w := testWorld(t)
		w.sources[0].spec, w.spec.Sources[0] = spec, spec
		b := w.sources[0].unit(uid).Batches[0]
		if edit {
			b = replaceColumn(b, fieldScore, func(a arrow.Array) arrow.Array {
				return editInt64(a, func(v int64, ok bool) (int64, bool) { return v ^ 1, ok })
			})
		}
		commitBatches(t, w, engine.SnapshotID{Epoch: 1, Seq: 1}, []arrow.RecordBatch{b})
		return w
	}
	wantClean(t, run(false))
	wantViolation(t, run(true), "(digest")
}

// The bodies a client sends spell every optional value and null as the
// source reads them; CSV goes as JSON lines when its payloads could all
// read as numbers.
func TestRequestBodies(t *testing.T) {
	spec := evolving()
	spec.Encoding = EncodingCSV
	uid := findShape(t, spec, unitShape{tag: true, score: scoreFloat})
	b, _ := unitContent(spec, uid)
	in := engine.Unit{Schema: b.Schema(), Batches: []arrow.RecordBatch{b}}
	body, err := requestBody(spec, uid, in)
	if err != nil || body.ctype != textCSV {
		t.Fatalf("%+v %v", body, err)
	}
	lines := strings.Split(string(body.bytes), "\n")
	if lines[0] != "uid,row,payload,tag,zip,score" || !strings.HasSuffix(lines[1], ".5") || !strings.Contains(lines[2], ",,") {
		t.Fatalf("CSV body:\n%s", body.bytes)
	}
	spec.Encoding = EncodingJSON
	body, _ = requestBody(spec, uid, in)
	if !strings.Contains(string(body.bytes), `"tag":null`) || int64(strings.Count(string(body.bytes), `"tag"`)) == b.NumRows() {
		t.Fatalf("JSON body: nulls neither spelled null and absent:\n%s", body.bytes)
	}
	for cell, text := range map[string]bool{"abc12": true, "12345678": false, "1e5": false, "-0.5": false, "true": false, "12:00": false, "0x1f": true} {
		if textCell(cell) != text {
			t.Errorf("textCell(%q) = %v", cell, !text)
		}
	}
}

// UnitColumns takes the optional fields and CDC columns, and refuses a
// column the world never produces.
func TestUnitColumnsStrict(t *testing.T) {
	spec := evolving()
	b, _ := unitContent(spec, findShape(t, spec, unitShape{tag: true, score: scoreInt}))
	if _, err := UnitColumns(b); err != nil {
		t.Fatal(err)
	}
	renamed := replaceColumn(b, fieldTag, func(a arrow.Array) arrow.Array { return a })
	fields := renamed.Schema().Fields()
	fields[renamed.Schema().FieldIndices(fieldTag)[0]].Name = "surprise"
	odd := array.NewRecordBatch(arrow.NewSchema(fields, nil), renamed.Columns(), renamed.NumRows())
	if _, err := UnitColumns(odd); err == nil || !strings.Contains(err.Error(), "surprise") {
		t.Fatalf("an unknown column: %v", err)
	}
}
