package segment

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"pgregory.net/rapid"

	"github.com/skipprd/skipprd/internal/arrowgen"
)

// drawParts draws 0..6 parts with random schemas, batches (possibly none,
// possibly empty), CDC sidecars on some, and distinct keys.
func drawParts(t *rapid.T, mem memory.Allocator) []Part {
	n := rapid.IntRange(0, 6).Draw(t, "parts")
	parts := make([]Part, n)
	for i := range parts {
		schema := arrowgen.Schema(t, 5)
		batches := arrowgen.Batches(t, mem, schema, 3, 20)
		key := PartitionKey{
			SinkRef:   rapid.SampledFrom([]string{"lake", "pg", "warehouse-ü"}).Draw(t, "sink"),
			Namespace: fmt.Sprintf("ns%d", i),
			Partition: rapid.StringN(0, 8, -1).Draw(t, "partition"),
			Schema:    FingerprintOf(schema),
		}
		if rapid.Bool().Draw(t, "bucketed") {
			key.Bucketed, key.BucketUnixMs = true, rapid.Int64().Draw(t, "bucket")
		}
		parts[i] = Part{Key: key, Schema: schema, Batches: batches}
		if rapid.Bool().Draw(t, "cdc") {
			parts[i].Sidecar = drawSidecar(t, int(rowsOf(batches)))
		}
	}
	return parts
}

func rowsOf(batches []arrow.RecordBatch) (n int64) {
	for _, b := range batches {
		n += b.NumRows()
	}
	return n
}

// tb is what *testing.T and *rapid.T share.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func encodeParts(t tb, parts []Part, offsets Offsets, mem memory.Allocator) ([]byte, *Index) {
	t.Helper()
	var buf bytes.Buffer
	ix, err := Encode(&buf, 1234, offsets, parts, mem)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), ix
}

// Everything encoded comes back: header, offsets, index, every slice's
// batches (floats compared bit for bit), sidecars; the marker round-trips
// and binds to the body; and no Arrow memory leaks.
func TestBodyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		parts := drawParts(t, mem)
		offsets := drawOffsets(t, "offsets")
		body, ix := encodeParts(t, parts, offsets, mem)
		if ix.BodyBytes != int64(len(body)) || len(ix.Entries) != len(parts) {
			t.Fatalf("index says %d bytes, %d parts; wrote %d bytes, %d parts", ix.BodyBytes, len(ix.Entries), len(body), len(parts))
		}
		marker, err := EncodeMarker(ix)
		if err != nil {
			t.Fatal(err)
		}
		mix, err := DecodeMarker("m", marker)
		if err != nil {
			t.Fatal(err)
		}
		b, err := CheckBody(mix, "b", Bytes(body), int64(len(body)))
		if err != nil {
			t.Fatal(err)
		}
		if !b.Index.Equal(ix) || !mix.Equal(ix) {
			t.Fatalf("decoded index differs:\n%s\nwant\n%s", describe(b.Index), describe(ix))
		}
		for i, p := range parts {
			s, err := b.ReadSlice(SliceOrdinal(i), mem)
			if err != nil {
				t.Fatal(err)
			}
			assertSliceExact(t, s, p)
			s.Release()
		}
		releaseParts(parts)
		mem.AssertSize(t, 0)
	})
}

func assertSliceExact(t *rapid.T, s *Slice, p Part) {
	if s.Entry.Key != p.Key || !s.Schema.Equal(p.Schema) || len(s.Batches) != len(p.Batches) {
		t.Fatalf("slice %v: key/schema/batch count differ from the part", s.Entry)
	}
	for i := range s.Batches {
		if !arrowgen.ExactEqual(s.Batches[i], p.Batches[i]) {
			t.Fatalf("slice %d batch %d differs", s.Entry.Ordinal, i)
		}
	}
	if (s.Sidecar == nil) != (p.Sidecar == nil) || (s.Sidecar != nil && !sidecarsEqual(s.Sidecar, p.Sidecar)) {
		t.Fatalf("slice %d sidecar differs", s.Entry.Ordinal)
	}
}

// A reader that counts the bytes it serves. ReadIndex must touch headers
// only: never a byte of any Arrow stream or sidecar.
type tracingReader struct {
	Bytes
	reads [][2]int64
}

func (r *tracingReader) ReadAt(p []byte, off int64) (int, error) {
	r.reads = append(r.reads, [2]int64{off, off + int64(len(p))})
	return r.Bytes.ReadAt(p, off)
}

func TestReadIndexSkipsPayloads(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	parts, offsets := goldenParts(mem)
	defer releaseParts(parts)
	body, want := encodeParts(t, parts, offsets, mem)
	r := &tracingReader{Bytes: body}
	ix, err := ReadIndex("b", r, int64(len(body)))
	if err != nil {
		t.Fatal(err)
	}
	if !ix.Equal(want) {
		t.Fatal("index differs")
	}
	for _, rd := range r.reads {
		for _, e := range ix.Entries {
			// A header window may run into the payload that follows it (it
			// reads partHeaderBytesMax at once); the cursor must not parse
			// past the header, which ArrowStart checks. What matters is that
			// no read starts inside a payload.
			if rd[0] >= e.ArrowStart && rd[0] < e.End() {
				t.Fatalf("read [%d,%d) starts inside part %d's payload [%d,%d)", rd[0], rd[1], e.Ordinal, e.ArrowStart, e.End())
			}
		}
	}
	if len(r.reads) != 3+len(ix.Entries) {
		t.Fatalf("%d reads for %d parts; want footer + header + offsets + one per part", len(r.reads), len(ix.Entries))
	}
}

func TestEncoderRejects(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	parts, _ := goldenParts(mem)
	defer releaseParts(parts)
	orders, events := parts[0], parts[1]
	mutate := func(f func(p *Part)) Part {
		p := orders
		f(&p)
		return p
	}
	for _, c := range []struct {
		name string
		part Part
		want error
	}{
		{"no sink", mutate(func(p *Part) { p.Key.SinkRef = "" }), ErrInvalid},
		{"long namespace", mutate(func(p *Part) { p.Key.Namespace = string(make([]byte, KeyFieldBytesMax+1)) }), ErrInvalid},
		{"bad utf8", mutate(func(p *Part) { p.Key.Partition = "\xff" }), ErrInvalid},
		{"bucket without flag", mutate(func(p *Part) { p.Key.BucketUnixMs = 5 }), ErrInvalid},
		{"no schema", mutate(func(p *Part) { p.Schema = nil }), ErrInvalid},
		{"fingerprint mismatch", mutate(func(p *Part) { p.Key.Schema++ }), ErrInvalid},
		{"batch of another schema", mutate(func(p *Part) { p.Batches = events.Batches }), ErrInvalid},
		{"sidecar short", mutate(func(p *Part) { p.Sidecar = &Sidecar{Rows: p.Sidecar.Rows[:2]} }), ErrInvalid},
		{"sidecar bad kind", mutate(func(p *Part) {
			p.Sidecar = &Sidecar{Rows: []CDCRow{{Kind: 7}, {Kind: 1}, {Kind: 1}}}
		}), ErrInvalid},
	} {
		var buf bytes.Buffer
		_, err := Encode(&buf, 0, nil, []Part{c.part}, mem)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := Encode(&bytes.Buffer{}, 0, Offsets{{"b", 1}, {"a", 1}}, nil, mem); !errors.Is(err, ErrInvalid) {
		t.Errorf("unsorted offsets: got %v, want ErrInvalid", err)
	}
}

// A writer error stops the encoder for good: nothing is reported as
// written that was not.
func TestEncoderWriteError(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	parts, offsets := goldenParts(mem)
	defer releaseParts(parts)
	for limit := 0; limit < 3000; limit += 97 {
		w := &failingWriter{left: limit}
		_, err := Encode(w, 0, offsets, parts, mem)
		if !errors.Is(err, errDiskFull) {
			t.Fatalf("limit %d: got %v, want the writer's error", limit, err)
		}
	}
}

var errDiskFull = errors.New("disk full")

type failingWriter struct{ left int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left = 0
		return n, errDiskFull
	}
	w.left -= len(p)
	return len(p), nil
}
