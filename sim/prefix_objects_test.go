package sim

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// prefixTestWorld is a small world whose source 0 drops objects of
// every format, some unreadable.
func prefixTestWorld(t *testing.T) (*World, *source) {
	t.Helper()
	spec := SmallSpec("")
	spec.Sources[0] = SourceSpec{Name: "obj", Replayable: true, Prefix: true, RowsMin: 1, RowsMax: 40,
		Formats: FormatsMixed, ChunkBytes: 1024, CorruptPermille: 200}
	w := NewWorld(Config{Seed: 1, Iters: 1, World: &spec})
	return w, w.sources[0]
}

// Each object's pieces say where their rows end: a text piece at the
// byte after its record (the last at the object's end), a Parquet piece
// at its row-group count (bit 63 on the last), and each holds the rows
// the oracle was told of. Every format and every kind of unreadable
// object is made.
func TestPrefixObjectLayouts(t *testing.T) {
	w, s := prefixTestWorld(t)
	seen := map[string]bool{}
	for k := uint64(1); k <= 200; k++ {
		obj, body, err := s.buildObject(k)
		if err != nil {
			t.Fatal(err)
		}
		seen[obj.format+"/"+obj.corrupt] = true
		if obj.corrupt != "" {
			if len(obj.pieces) != 0 {
				t.Fatalf("unreadable object %s has pieces", obj.name)
			}
			continue
		}
		for _, p := range obj.pieces {
			b, _ := unitContent(s.spec, p.uid)
			var d RowDigest
			if err := d.AddBatch(b, nil); err != nil || d != w.oracle.units[p.uid].digest || int(b.NumRows()) != p.rows {
				t.Fatalf("%s piece %s: its content is not what was produced (%v)", obj.name, p.uid, err)
			}
			b.Release()
		}
		checkEnds(t, obj, body)
	}
	for _, want := range []string{"jsonl/", "csv/", "parquet/", "jsonl/" + badLine, "csv/" + raggedRecord, "parquet/" + cutFooter, "jsonl/" + unknownExtension} {
		if !seen[want] {
			t.Errorf("no object %q in 200 (seen %v)", want, seen)
		}
	}
}

// checkEnds checks the pieces' offsets against the object's bytes.
func checkEnds(t *testing.T, obj *objectLayout, body []byte) {
	t.Helper()
	last := obj.pieces[len(obj.pieces)-1]
	if obj.format != objParquet {
		start := uint64(0)
		if obj.format == objCSV {
			start = uint64(bytes.IndexByte(body, '\n') + 1) // the header
		}
		for _, p := range obj.pieces {
			rec := body[start:p.end]
			if bytes.Count(rec, []byte{'\n'}) != 1 || !bytes.Contains(rec, []byte(strconv.FormatUint(uint64(p.uid), 10))) {
				t.Fatalf("%s: piece %s ends at %d, not after its record (%q)", obj.name, p.uid, p.end, rec)
			}
			start = p.end
		}
		if last.end != uint64(len(body)) {
			t.Fatalf("%s: last piece ends at %d of %d bytes", obj.name, last.end, len(body))
		}
		return
	}
	rdr, err := file.NewParquetReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	if n := rdr.NumRowGroups(); last.end != 1<<63|uint64(n) || len(obj.pieces) != n {
		t.Fatalf("%s: %d row groups, %d pieces, the last ending at %x", obj.name, n, len(obj.pieces), last.end)
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	for g, p := range obj.pieces {
		tbl, err := fr.ReadRowGroups(context.Background(), []int{0, 1, 2}, []int{g})
		if err != nil || tbl.NumRows() != int64(p.rows) {
			t.Fatalf("%s group %d: %v rows, piece of %d (%v)", obj.name, g, tbl.NumRows(), p.rows, err)
		}
		tbl.Release()
	}
}
