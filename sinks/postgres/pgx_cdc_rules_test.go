package postgres

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
)

// Two changes of one identity with equal order tokens — the same change
// delivered twice, here with different values to tell them apart — keep
// the first, within a job (DISTINCT ON … s_pos) and across jobs (the
// upsert's strict "<"), on the server as in the model.
func TestPGXCDCEqualOrderFirstStays(t *testing.T) {
	s := newServer(t, 2)
	model := NewModel()
	k := []byte("k")
	jobs := []struct {
		id      string
		changes []segment.CDCRow
		values  [][]*int64
	}{
		{"j1", []segment.CDCRow{{Kind: segment.Insert, Identity: k, Order: 7}, {Kind: segment.Update, Identity: k, Order: 7}}, [][]*int64{{i64(1)}, {i64(2)}}},
		{"j2", []segment.CDCRow{{Kind: segment.Delete, Identity: k, Order: 7}}, [][]*int64{{i64(3)}}},
	}
	for _, j := range jobs {
		tx, err := Plan(cdcJob(j.id, "eq", j.changes, int64Batch(t, []string{"a"}, j.values)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.Apply(ctxT(t), tx); err != nil {
			t.Fatal(err)
		}
		if _, err := model.Apply(ctxT(t), tx); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]RowState{"6b": {Order: 7, Deleted: false, Values: []string{"1"}}}
	if got := readTable1(t, s, "eq"); !reflect.DeepEqual(got, want) {
		t.Fatalf("server %v, want %v", got, want)
	}
	if got := modelState(model, "eq"); !reflect.DeepEqual(got, want) {
		t.Fatalf("model %v, want %v", got, want)
	}
}

// readTable1 reads a CDC table with one data column a.
func readTable1(t *testing.T, s *server, table string) map[string]RowState {
	out := map[string]RowState{}
	for _, r := range s.texts(t, `SELECT encode(_cdc_identity, 'hex'), _cdc_order::text, _cdc_deleted::text, coalesce(a::text, '(null)') FROM `+quote(table)) {
		var st RowState
		st.Deleted = r[2] == "true"
		st.Values = []string{r[3]}
		for _, d := range r[1] {
			st.Order = st.Order*10 + uint64(d-'0')
		}
		out[r[0]] = st
	}
	return out
}

// A row reflects its latest change alone: a change of a job without a
// column the table has (added by an earlier job) sets that column NULL;
// a delete is a tombstone with the delete's values, and an older insert
// arriving later does not resurrect it.
func TestPGXCDCRowReflectsItsChange(t *testing.T) {
	s := newServer(t, 2)
	k := []byte{0x00}
	wide := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.BinaryTypes.String}}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, wide)
	defer rb.Release()
	rb.Field(0).(*array.Int64Builder).Append(1)
	rb.Field(1).(*array.StringBuilder).Append("old")
	s.mustApply(t, cdcJob("j1", "reflect", []segment.CDCRow{{Kind: segment.Insert, Identity: k, Order: 1}}, rb.NewRecordBatch()))
	s.mustApply(t, cdcJob("j2", "reflect", []segment.CDCRow{{Kind: segment.Update, Identity: k, Order: 2}}, int64Batch(t, []string{"a"}, [][]*int64{{i64(2)}})))
	if got := s.texts(t, "SELECT a::text, b::text, _cdc_order::text FROM reflect"); !reflect.DeepEqual(got, [][]string{{"2", "NULL", "2"}}) {
		t.Fatalf("after the update: %v, want b NULL", got)
	}
	s.mustApply(t, cdcJob("j3", "reflect", []segment.CDCRow{{Kind: segment.Delete, Identity: k, Order: 5}}, int64Batch(t, []string{"a"}, [][]*int64{{i64(5)}})))
	s.mustApply(t, cdcJob("j4", "reflect", []segment.CDCRow{{Kind: segment.Insert, Identity: k, Order: 4}}, int64Batch(t, []string{"a"}, [][]*int64{{i64(4)}})))
	if got := s.texts(t, "SELECT a::text, _cdc_deleted::text, _cdc_order::text FROM reflect"); !reflect.DeepEqual(got, [][]string{{"5", "true", "5"}}) {
		t.Fatalf("after the delete and a late insert: %v, want the tombstone at 5", got)
	}
}

// The longest identity Plan allows is accepted as the CDC table's
// primary key by the server (a btree entry must fit a third of a page).
func TestPGXLongestIdentity(t *testing.T) {
	s := newServer(t, 2)
	id := make([]byte, IdentityBytesMax)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(id) // random bytes: nothing to compress

	s.mustApply(t, cdcJob("j", "longid", []segment.CDCRow{{Kind: segment.Insert, Identity: id, Order: 1}}, int64Batch(t, []string{"a"}, [][]*int64{{i64(1)}})))
	if n := s.count(t, "SELECT octet_length(_cdc_identity) FROM longid"); n != IdentityBytesMax {
		t.Fatalf("identity of %d bytes stored", n)
	}
}
