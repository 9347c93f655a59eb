package segment

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/internal/golden"
)

// Run `go test ./engine/segment -run Golden -update` after a deliberate
// format change, and review every byte of the diff.
var update = flag.Bool("update", false, "rewrite golden vectors and the fuzz seed corpus")

const goldenDir = "testdata/golden"

// goldenObjects encodes the golden segment, its marker and a bitmap with
// slices 0 and 2 applied.
func goldenObjects(t *testing.T, mem memory.Allocator) (body, marker, bitmap []byte, ix *Index) {
	t.Helper()
	parts, offsets := goldenParts(mem)
	defer releaseParts(parts)
	var buf bytes.Buffer
	ix, err := Encode(&buf, goldenCreatedAtUnixMs, offsets, parts, mem)
	if err != nil {
		t.Fatal(err)
	}
	marker, err = EncodeMarker(ix)
	if err != nil {
		t.Fatal(err)
	}
	bm := NewBitmap(len(ix.Entries))
	bm.Set(0)
	bm.Set(2)
	return buf.Bytes(), marker, bm.Encode(), ix
}

// goldenOrigin is the origin of the golden version 2 marker.
var goldenOrigin = Origin{WAL: WALID{0x5e, 0x9d, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 0xff}, Pipeline: "golden"}

// goldenMarkerV2 is the golden segment's marker as builds before cuts
// wrote it: version 2, with an origin. (segment.seg.commit, version 1, is
// what builds before origins wrote; all three versions must keep decoding.)
func goldenMarkerV2(t *testing.T, ix *Index) []byte {
	t.Helper()
	with := *ix
	with.Origin = goldenOrigin
	b, err := EncodeMarker(&with)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goldenCuts are the cuts of the golden version 3 marker.
var goldenCuts = []Cut{
	{Group: Group{SinkRef: "lake", Namespace: "events", Schema: 0x0123456789abcdef}, First: SegmentRef{3, 17}, Segments: 4, Parts: 9, Reason: CutSize},
	{Group: Group{SinkRef: "lake", Namespace: "orders", Schema: 7, CDC: true}, First: SegmentRef{4, 1}, Segments: 1, Parts: 1, Reason: CutInterval},
	{Group: Group{SinkRef: "pg", Namespace: "events", Schema: 7}, First: SegmentRef{4, 2}, Segments: 1, Parts: 2, Reason: CutEvery},
}

// goldenMarkerV3 is the golden segment's marker as this build writes it:
// version 3, with an origin and cuts.
func goldenMarkerV3(t *testing.T, ix *Index) []byte {
	t.Helper()
	with := *ix
	with.Origin, with.Spanning, with.Cuts = goldenOrigin, true, goldenCuts
	b, err := EncodeMarker(&with)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// describe renders an index for humans; the golden .txt makes a format
// change readable in review.
func describe(ix *Index) string {
	var b strings.Builder
	fmt.Fprintf(&b, "body_bytes %d\nbody_sha256 %x\ncreated_at_unix_ms %d\n", ix.BodyBytes, ix.BodySum, ix.CreatedAtUnixMs)
	for _, o := range ix.Offsets {
		fmt.Fprintf(&b, "offset %s = %d\n", o.Key, o.Value)
	}
	for _, e := range ix.Entries {
		fmt.Fprintf(&b, "%s\n", e)
	}
	return b.String()
}

func TestGoldenVectors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	body, marker, bitmap, ix := goldenObjects(t, mem)
	markerV2, markerV3 := goldenMarkerV2(t, ix), goldenMarkerV3(t, ix)
	files := map[string][]byte{
		"segment.seg":           body,
		"segment.seg.commit":    marker,
		"segment-v2.seg.commit": markerV2,
		"segment-v3.seg.commit": markerV3,
		"segment.scbl":          bitmap,
		"segment.txt":           []byte(describe(ix)),
	}
	golden.Check(t, goldenDir, files, []string{"segment.seg", "segment.seg.commit", "segment-v2.seg.commit", "segment-v3.seg.commit", "segment.scbl", "segment.txt"}, *update)
	if *update {
		writeFuzzCorpus(t, body, marker, markerV2, markerV3, bitmap, ix)
	}
}

// TestGoldenDecode reads the committed bytes (not a fresh encoding), so a
// reader change that can no longer read old segments fails here.
func TestGoldenDecode(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(goldenDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	body, marker, bitmap := read("segment.seg"), read("segment.seg.commit"), read("segment.scbl")
	opened, err := OpenBody("segment.seg", Bytes(body), int64(len(body)))
	if err != nil {
		t.Fatal(err)
	}
	ix := opened.Index
	if got, want := describe(ix), string(read("segment.txt")); got != want {
		t.Fatalf("decoded index:\n%s\nwant:\n%s", got, want)
	}
	mix, err := DecodeMarker("segment.seg.commit", marker)
	if err != nil {
		t.Fatal(err)
	}
	checked, err := CheckBody(mix, "segment.seg", Bytes(body), int64(len(body)))
	if err != nil {
		t.Fatal(err)
	}
	if !mix.Origin.IsZero() || !checked.Index.Origin.IsZero() {
		t.Fatalf("version 1 marker decoded with origin %v", mix.Origin)
	}
	mix2, err := DecodeMarker("segment-v2.seg.commit", read("segment-v2.seg.commit"))
	if err != nil {
		t.Fatal(err)
	}
	if mix2.Origin != goldenOrigin || !mix2.Equal(mix) {
		t.Fatalf("version 2 marker: origin %v (want %v), same index as version 1: %v", mix2.Origin, goldenOrigin, mix2.Equal(mix))
	}
	if checked2, err := CheckBody(mix2, "segment.seg", Bytes(body), int64(len(body))); err != nil || checked2.Index.Origin != goldenOrigin {
		t.Fatalf("CheckBody with a version 2 marker: %v, origin %v", err, checked2.Index.Origin)
	}
	if mix2.Spanning || len(mix2.Cuts) > 0 {
		t.Fatalf("version 2 marker decoded as spanning (%d cuts)", len(mix2.Cuts))
	}
	mix3, err := DecodeMarker("segment-v3.seg.commit", read("segment-v3.seg.commit"))
	if err != nil {
		t.Fatal(err)
	}
	if mix3.Origin != goldenOrigin || !mix3.Equal(mix) || !mix3.Spanning || !slices.Equal(mix3.Cuts, goldenCuts) {
		t.Fatalf("version 3 marker: origin %v, same index %v, spanning %v, cuts %v (want %v)", mix3.Origin, mix3.Equal(mix), mix3.Spanning, mix3.Cuts, goldenCuts)
	}
	bm, err := DecodeBitmap("segment.scbl", bitmap)
	if err != nil {
		t.Fatal(err)
	}
	if bm.Len() != 3 || !bm.IsSet(0) || bm.IsSet(1) || !bm.IsSet(2) {
		t.Fatalf("bitmap: %d bits, set %v %v %v", bm.Len(), bm.IsSet(0), bm.IsSet(1), bm.IsSet(2))
	}
	parts, _ := goldenParts(mem)
	defer releaseParts(parts)
	for i := range ix.Entries {
		s, err := checked.ReadSlice(SliceOrdinal(i), mem)
		if err != nil {
			t.Fatal(err)
		}
		assertSliceMatches(t, s, parts[i])
		s.Release()
	}
}

// assertSliceMatches checks a decoded slice against the part it came from.
func assertSliceMatches(t tb, s *Slice, p Part) {
	t.Helper()
	if s.Entry.Key != p.Key {
		t.Fatalf("key %v, want %v", s.Entry.Key, p.Key)
	}
	if !s.Schema.Equal(p.Schema) {
		t.Fatalf("schema %v, want %v", s.Schema, p.Schema)
	}
	if len(s.Batches) != len(p.Batches) {
		t.Fatalf("%d batches, want %d", len(s.Batches), len(p.Batches))
	}
	for i := range s.Batches {
		if !array.RecordEqual(s.Batches[i], p.Batches[i]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	switch {
	case (s.Sidecar == nil) != (p.Sidecar == nil):
		t.Fatalf("sidecar present %v, want %v", s.Sidecar != nil, p.Sidecar != nil)
	case s.Sidecar != nil && !sidecarsEqual(s.Sidecar, p.Sidecar):
		t.Fatal("sidecar differs")
	}
}
