package segment

import (
	"bytes"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Streaming in small chunks, keeping only one PART's window, verifies the
// whole body and then reads that PART exactly as the full body would.
func TestStreamedWindowBody(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	parts, offsets := goldenParts(mem)
	defer releaseParts(parts)
	body, ix := encodeParts(t, parts, offsets, mem)
	want := ix.Entries[1]
	off, n := PartWindow(want)
	for _, chunk := range []int{1, 7, 100, len(body)} {
		check := NewStreamCheck("b", ix)
		kept := make([]byte, 0, n)
		for at := 0; at < len(body); at += chunk {
			p := body[at:min(at+chunk, len(body))]
			check.Write(p)
			lo, hi := max(int64(at), off), min(int64(at+len(p)), off+n)
			if lo < hi {
				kept = append(kept, p[lo-int64(at):hi-int64(at)]...)
			}
		}
		if err := check.Done(); err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		b := WindowBody("b", ix, []Window{{Off: off, Bytes: kept}})
		s, err := b.ReadSlice(1, mem)
		if err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		assertSliceMatches(t, s, parts[1])
		s.Release()
		if _, err := b.ReadSlice(0, mem); err == nil {
			t.Fatal("read a PART outside the kept windows")
		}
	}
}

func TestStreamCheckRejects(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	parts, offsets := goldenParts(mem)
	defer releaseParts(parts)
	body, ix := encodeParts(t, parts, offsets, mem)
	for _, c := range []struct {
		name string
		in   []byte
		want error
	}{
		{"flipped byte", func() []byte { b := bytes.Clone(body); b[100] ^= 1; return b }(), ErrChecksum},
		{"short", body[:len(body)-1], ErrCorrupt},
		{"long", append(bytes.Clone(body), 0), ErrCorrupt},
	} {
		check := NewStreamCheck("b", ix)
		check.Write(c.in)
		if err := check.Done(); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// A slice read from a detached body holds its own bytes: damaging the
// body after the read does not change it. (Read in place, it would.)
func TestDetachedBodyCopies(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	parts, offsets := goldenParts(mem)
	defer releaseParts(parts)
	body, _ := encodeParts(t, parts, offsets, mem)
	for _, detached := range []bool{false, true} {
		raw := bytes.Clone(body)
		b, err := OpenBody("b", Bytes(raw), int64(len(raw)))
		if err != nil {
			t.Fatal(err)
		}
		if detached {
			b = b.Detached()
		}
		s, err := b.ReadSlice(1, mem)
		if err != nil {
			t.Fatal(err)
		}
		clear(raw)
		same := true
		for i := range s.Batches {
			if !array.RecordEqual(s.Batches[i], parts[1].Batches[i]) {
				same = false
			}
		}
		s.Release()
		if same != detached {
			t.Fatalf("detached %v: slice unchanged by clearing the body: %v", detached, same)
		}
	}
}
