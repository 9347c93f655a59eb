package segment

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"pgregory.net/rapid"
)

// typedReject fails unless err is a decode error of the corruption family
// or an unsupported version (a flipped version byte reads as one).
func typedReject(t *rapid.T, what string, err error) {
	if err == nil {
		t.Fatalf("%s: accepted", what)
	}
	var fe *FormatError
	if !errors.As(err, &fe) || !(errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupportedVersion)) {
		t.Fatalf("%s: untyped error %T: %v", what, err, err)
	}
}

// damage returns b with one byte changed or with its tail cut off.
func damage(t *rapid.T, b []byte) []byte {
	if rapid.Bool().Draw(t, "truncate") {
		return b[:rapid.IntRange(0, len(b)-1).Draw(t, "length")]
	}
	out := bytes.Clone(b)
	i := rapid.IntRange(0, len(b)-1).Draw(t, "at")
	out[i] ^= rapid.ByteRange(1, 255).Draw(t, "xor")
	return out
}

func TestDamageIsRejected(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	parts, offsets := goldenParts(mem)
	defer releaseParts(parts)
	body, ix := encodeParts(t, parts, offsets, mem)
	marker, err := EncodeMarker(ix)
	if err != nil {
		t.Fatal(err)
	}
	bm := NewBitmap(len(ix.Entries))
	bm.Set(1)
	bitmap := bm.Encode()
	rapid.Check(t, func(t *rapid.T) {
		switch rapid.IntRange(0, 2).Draw(t, "object") {
		case 0:
			bad := damage(t, body)
			_, err := OpenBody("b", Bytes(bad), int64(len(bad)))
			typedReject(t, "body", err)
			_, err = CheckBody(ix, "b", Bytes(bad), int64(len(bad)))
			typedReject(t, "body against its marker", err)
		case 1:
			_, err := DecodeMarker("m", damage(t, marker))
			typedReject(t, "marker", err)
		case 2:
			_, err := DecodeBitmap("s", damage(t, bitmap))
			typedReject(t, "bitmap", err)
		}
	})
}

// A marker whose checksum is right but whose entries disagree with the
// body layout is refused: the marker is checked as strictly as a body.
func TestMarkerLayoutChecked(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	parts, offsets := goldenParts(mem)
	defer releaseParts(parts)
	_, ix := encodeParts(t, parts, offsets, mem)
	for _, c := range []struct {
		name string
		edit func(ix *Index)
	}{
		{"ordinal", func(ix *Index) { ix.Entries[1].Ordinal = 5 }},
		{"arrow_start", func(ix *Index) { ix.Entries[1].ArrowStart++ }},
		{"gap before sidecar", func(ix *Index) { ix.Entries[2].SidecarStart++; ix.BodyBytes++ }},
		{"parts overrun the footer", func(ix *Index) { ix.BodyBytes -= 8 }},
		{"parts stop short of the footer", func(ix *Index) { ix.BodyBytes += 8 }},
		{"empty arrow stream", func(ix *Index) { ix.Entries[2].ArrowLen = 0 }},
	} {
		bad := *ix
		bad.Entries = append([]IndexEntry(nil), ix.Entries...)
		c.edit(&bad)
		m, err := EncodeMarker(&bad)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, err := DecodeMarker(c.name, m); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", c.name, err)
		}
	}
}

// craftPart builds a PART by hand so a test can break one agreement the
// encoder would never break, then seal the body with a valid checksum.
type craftPart struct {
	part    Part
	rows    int64  // index row count
	sidecar []byte // raw sidecar bytes (nil: none)
	tail    []byte // appended to the Arrow stream
	cutEOS  bool   // drop the end-of-stream marker
}

func craftBody(t *testing.T, mem memory.Allocator, cps []craftPart) []byte {
	t.Helper()
	blob, _ := AppendOffsets(nil, nil)
	b := append([]byte(bodyMagic), 3, 0)
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(blob)))
	b = append(b, blob...)
	for i, cp := range cps {
		var stream bytes.Buffer
		if err := writeIPC(&stream, cp.part, mem); err != nil {
			t.Fatal(err)
		}
		arrow := stream.Bytes()
		if cp.cutEOS {
			arrow = arrow[:len(arrow)-len(eosMarker)]
		}
		arrow = append(arrow, cp.tail...)
		e := IndexEntry{Ordinal: SliceOrdinal(i), Key: cp.part.Key, ArrowLen: int64(len(arrow)),
			SidecarLen: int64(len(cp.sidecar)), Rows: cp.rows}
		e.ArrowStart = int64(len(b)) + partHeaderLen(e)
		e.SidecarStart = e.ArrowStart + e.ArrowLen
		b = appendIndexEntry(append(b, partMagic...), e)
		b = append(append(b, arrow...), cp.sidecar...)
	}
	b = binary.LittleEndian.AppendUint32(append(b, footMagic...), uint32(len(cps)))
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

func TestSliceRefusals(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	parts, _ := goldenParts(mem)
	defer releaseParts(parts)
	orders := parts[0] // 3 rows, CDC
	sidecar := func(rows int) []byte {
		b, _ := AppendSidecar(nil, &Sidecar{Rows: orders.Sidecar.Rows[:rows]})
		return b
	}
	otherSchema := orders
	otherSchema.Key.Schema++
	for _, c := range []struct {
		name string
		cp   craftPart
		want error
	}{
		{"control: well formed", craftPart{part: orders, rows: 3, sidecar: sidecar(3)}, nil},
		{"sidecar rows differ from arrow rows", craftPart{part: orders, rows: 2, sidecar: sidecar(2)}, ErrRowCountMismatch},
		{"sidecar rows differ from the index", craftPart{part: orders, rows: 3, sidecar: sidecar(2)}, ErrRowCountMismatch},
		{"arrow rows differ from the index", craftPart{part: orders, rows: 4}, ErrRowCountMismatch},
		{"schema differs from the key", craftPart{part: otherSchema, rows: 3}, ErrCorrupt},
		{"bytes after end of stream", craftPart{part: orders, rows: 3, tail: eosMarker}, ErrCorrupt},
		{"no end of stream", craftPart{part: orders, rows: 3, cutEOS: true}, ErrCorrupt},
	} {
		body := craftBody(t, mem, []craftPart{c.cp})
		b, err := OpenBody(c.name, Bytes(body), int64(len(body)))
		if err != nil {
			t.Fatalf("%s: crafted body rejected before slicing: %v", c.name, err)
		}
		s, err := b.ReadSlice(0, mem)
		if s != nil {
			s.Release()
		}
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}
