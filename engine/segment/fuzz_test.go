package segment

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Fuzz targets: every decoder, on any input, returns a value or a typed
// error and never panics; whatever it accepts re-encodes to the same bytes
// (the encodings are canonical). The seed corpus under testdata/fuzz is
// written by `go test -run Golden -update`; `make fuzz` runs each target.

func FuzzOpenBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := OpenBody("fuzz", Bytes(data), int64(len(data)))
		if err != nil {
			assertTyped(t, err)
			return
		}
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		for i := range b.Index.Entries {
			s, err := b.ReadSlice(SliceOrdinal(i), mem)
			if err != nil {
				t.Fatalf("verified body, unreadable slice %d: %v", i, err)
			}
			s.Release()
		}
		mem.AssertSize(t, 0)
		assertMarkerRoundTrip(t, b.Index)
	})
}

// FuzzReadIndex parses headers without the checksum: the index walk must
// hold up on its own, since it runs before (and without) a full read.
func FuzzReadIndex(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := ReadIndex("fuzz", Bytes(data), int64(len(data)))
		if err != nil {
			assertTyped(t, err)
			return
		}
		assertMarkerRoundTrip(t, ix)
	})
}

// assertMarkerRoundTrip: any index a decoder accepts must survive the
// commit marker unchanged.
func assertMarkerRoundTrip(t *testing.T, ix *Index) {
	t.Helper()
	marker, err := EncodeMarker(ix)
	if err != nil {
		t.Fatalf("accepted index does not encode as a marker: %v", err)
	}
	mix, err := DecodeMarker("fuzz", marker)
	if err != nil {
		t.Fatalf("marker of an accepted index rejected: %v", err)
	}
	if !mix.Equal(ix) || mix.Origin != ix.Origin {
		t.Fatalf("marker changed the index:\n%s (%v)\nvs\n%s (%v)", describe(mix), mix.Origin, describe(ix), ix.Origin)
	}
}

func FuzzDecodeMarker(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := DecodeMarker("fuzz", data)
		if err != nil {
			assertTyped(t, err)
			return
		}
		assertCanonical(t, data, func() ([]byte, error) { return EncodeMarker(ix) })
	})
}

func FuzzDecodeBitmap(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBitmap("fuzz", data)
		if err != nil {
			assertTyped(t, err)
			return
		}
		assertCanonical(t, data, func() ([]byte, error) { return b.Encode(), nil })
	})
}

func FuzzDecodeSidecar(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSidecar("fuzz", data, 0)
		if err != nil {
			assertTyped(t, err)
			return
		}
		assertCanonical(t, data, func() ([]byte, error) { return AppendSidecar(nil, s) })
	})
}

func FuzzDecodeOffsets(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := DecodeOffsets("fuzz", data, 0)
		if err != nil {
			assertTyped(t, err)
			return
		}
		assertCanonical(t, data, func() ([]byte, error) { return AppendOffsets(nil, o) })
	})
}

func assertTyped(t *testing.T, err error) {
	t.Helper()
	if _, ok := err.(*FormatError); !ok {
		t.Fatalf("untyped decode error %T: %v", err, err)
	}
}

func assertCanonical(t *testing.T, data []byte, encode func() ([]byte, error)) {
	t.Helper()
	again, err := encode()
	if err != nil {
		t.Fatalf("accepted input does not re-encode: %v", err)
	}
	if !bytes.Equal(again, data) {
		t.Fatalf("accepted input is not canonical:\n in  %x\n out %x", data, again)
	}
}

// writeFuzzCorpus seeds each target with the golden objects and a few
// pieces of them, in the go test corpus format.
func writeFuzzCorpus(t *testing.T, body, marker, markerV2, markerV3, bitmap []byte, ix *Index) {
	t.Helper()
	cdc := ix.Entries[0]
	sidecar := body[cdc.SidecarStart:cdc.End()]
	blob := body[bodyHeaderBytes : ix.Entries[0].ArrowStart-partHeaderLen(ix.Entries[0])]
	seeds := map[string]map[string][]byte{
		"FuzzOpenBody":      {"golden": body, "empty_segment": emptyBody(t)},
		"FuzzReadIndex":     {"golden": body},
		"FuzzDecodeMarker":  {"golden": marker, "golden_v2": markerV2, "golden_v3": markerV3},
		"FuzzDecodeBitmap":  {"golden": bitmap, "empty": NewBitmap(0).Encode()},
		"FuzzDecodeSidecar": {"golden": sidecar},
		"FuzzDecodeOffsets": {"golden": blob},
		"FuzzDecodeCheckpoint": {"golden": func() []byte {
			b, err := EncodeCheckpoint(3, ix.Offsets)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}()},
	}
	for target, files := range seeds {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			entry := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(entry), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func partHeaderLen(e IndexEntry) int64 {
	return int64(magicBytes + len(appendIndexEntry(nil, e)))
}

func emptyBody(t *testing.T) []byte {
	var buf bytes.Buffer
	if _, err := Encode(&buf, 0, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
