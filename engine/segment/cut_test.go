package segment

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// markerV3 encodes the golden segment's marker with cuts.
func markerV3(t *testing.T, cuts []Cut) ([]byte, *Index) {
	t.Helper()
	_, _, ix := markerPair(t)
	with := *ix
	with.Origin, with.Spanning, with.Cuts = goldenOrigin, true, cuts
	b, err := EncodeMarker(&with)
	if err != nil {
		t.Fatal(err)
	}
	return b, ix
}

func TestCutsRoundTrip(t *testing.T) {
	for _, cuts := range [][]Cut{nil, goldenCuts[:1], goldenCuts} {
		b, ix := markerV3(t, cuts)
		if got := binary.LittleEndian.Uint16(b[4:]); got != MarkerVersion {
			t.Fatalf("a marker with cuts is version %d, want %d", got, MarkerVersion)
		}
		got, err := DecodeMarker("m", b)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Spanning || !slices.Equal(got.Cuts, cuts) || !got.Equal(ix) || got.Origin != goldenOrigin {
			t.Fatalf("decoded spanning %v cuts %v (want %v), index equal %v", got.Spanning, got.Cuts, cuts, got.Equal(ix))
		}
	}
}

// cutsAt is where the cuts section starts in a version 3 marker (just
// before the trailing checksum, after the entries).
func cutsAt(b []byte, cuts []Cut) int {
	return len(b) - sumBytes - len(appendCuts(nil, cuts))
}

func TestCutsChecked(t *testing.T) {
	b, _ := markerV3(t, goldenCuts)
	at := cutsAt(b, goldenCuts)
	first := at + 4 // cut[0]
	c0 := goldenCuts[0]
	schemaAt := first + 2 + len(c0.Group.SinkRef) + 2 + len(c0.Group.Namespace)
	cdcAt := schemaAt + 8
	segmentsAt := cdcAt + 1 + 16
	partsAt := segmentsAt + 4
	reasonAt := partsAt + 4
	cases := []struct {
		name   string
		damage func(b []byte)
		field  string
	}{
		{"count past what the bytes hold", func(b []byte) { binary.LittleEndian.PutUint32(b[at:], 1000) }, "cuts_count"},
		{"empty sink_ref", func(b []byte) { binary.LittleEndian.PutUint16(b[first:], 0) }, "cut[0].sink_ref"},
		{"cdc flag 2", func(b []byte) { b[cdcAt] = 2 }, "cut[0].cut"},
		{"no segments", func(b []byte) { binary.LittleEndian.PutUint32(b[segmentsAt:], 0) }, "cut[0].cut"},
		{"fewer parts than segments", func(b []byte) { binary.LittleEndian.PutUint32(b[partsAt:], 3) }, "cut[0].cut"},
		{"unknown reason", func(b []byte) { b[reasonAt] = byte(cutReasonEnd) }, "cut[0].cut"},
		{"no reason", func(b []byte) { b[reasonAt] = 0 }, "cut[0].cut"},
		{"out of order", func(b []byte) { b[schemaAt-len(c0.Group.Namespace)] = 'z' }, "cut[1].cut"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := append([]byte(nil), b...)
			c.damage(bad)
			_, err := DecodeMarker("m", resum(bad))
			var fe *FormatError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("got %v, want corruption in field %s", err, c.field)
			}
		})
	}
}

func TestCutsRefusedByEncoder(t *testing.T) {
	_, _, ix := markerPair(t)
	twice := []Cut{goldenCuts[0], goldenCuts[0]}
	bad := goldenCuts[0]
	bad.Parts = 0
	for name, with := range map[string]Index{
		"cuts without an origin":         {Spanning: true},
		"cuts without spanning":          {Origin: goldenOrigin, Cuts: goldenCuts},
		"one group twice":                {Origin: goldenOrigin, Spanning: true, Cuts: twice},
		"descending":                     {Origin: goldenOrigin, Spanning: true, Cuts: []Cut{goldenCuts[1], goldenCuts[0]}},
		"a cut of fewer parts than segs": {Origin: goldenOrigin, Spanning: true, Cuts: []Cut{bad}},
	} {
		w := *ix
		w.Origin, w.Spanning, w.Cuts = with.Origin, with.Spanning, with.Cuts
		if _, err := EncodeMarker(&w); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}
