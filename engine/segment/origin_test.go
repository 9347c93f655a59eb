package segment

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// markerPair encodes the golden segment's marker without an origin
// (version 1) and with one (version 2).
func markerPair(t *testing.T) (v1, v2 []byte, ix *Index) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	parts, offsets := goldenParts(mem)
	defer releaseParts(parts)
	_, ix = encodeParts(t, parts, offsets, mem)
	v1, err := EncodeMarker(ix)
	if err != nil {
		t.Fatal(err)
	}
	return v1, goldenMarkerV2(t, ix), ix
}

func TestMarkerOriginRoundTrip(t *testing.T) {
	v1, v2, ix := markerPair(t)
	if got := binary.LittleEndian.Uint16(v1[4:]); got != MarkerVersionLegacy {
		t.Fatalf("a marker without an origin is version %d, want %d", got, MarkerVersionLegacy)
	}
	if got := binary.LittleEndian.Uint16(v2[4:]); got != MarkerVersionOrigin {
		t.Fatalf("a marker with an origin and no cuts is version %d, want %d", got, MarkerVersionOrigin)
	}
	if want := len(v1) + WALIDBytes + lenPrefixBytes + len(goldenOrigin.Pipeline); len(v2) != want {
		t.Fatalf("version 2 marker of %d bytes, want %d (version 1's %d plus the origin)", len(v2), want, len(v1))
	}
	for name, b := range map[string][]byte{"v1": v1, "v2": v2} {
		mix, err := DecodeMarker(name, b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := Origin{}
		if name == "v2" {
			want = goldenOrigin
		}
		if mix.Origin != want || !mix.Equal(ix) {
			t.Fatalf("%s: origin %v, want %v; index equal %v", name, mix.Origin, want, mix.Equal(ix))
		}
	}
}

func TestMarkerOriginChecked(t *testing.T) {
	_, v2, _ := markerPair(t)
	walAt := markerFixedBytes - 8 // the WAL id follows created_at_unix_ms
	nameLenAt := walAt + WALIDBytes
	cases := []struct {
		name   string
		damage func(b []byte) []byte
		want   error
		field  string
	}{
		{"zero WAL id", func(b []byte) []byte { clear(b[walAt : walAt+WALIDBytes]); return b }, ErrCorrupt, "wal_id"},
		{"empty pipeline", func(b []byte) []byte { return emptyPipeline(b, nameLenAt) }, ErrCorrupt, "pipeline"},
		{"pipeline length past the limit", func(b []byte) []byte {
			binary.LittleEndian.PutUint16(b[nameLenAt:], PipelineBytesMax+1)
			return b
		}, ErrCorrupt, "pipeline_len"},
		{"version 4", func(b []byte) []byte { binary.LittleEndian.PutUint16(b[4:], 4); return b }, ErrUnsupportedVersion, "version"},
		{"version 3 without its cuts", func(b []byte) []byte { binary.LittleEndian.PutUint16(b[4:], 3); return b }, ErrTruncated, "cuts_count"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := c.damage(append([]byte(nil), v2...))
			_, err := DecodeMarker("m", resum(bad))
			var fe *FormatError
			if !errors.Is(err, c.want) || !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("got %v, want %v in field %s", err, c.want, c.field)
			}
		})
	}
}

// emptyPipeline rewrites a version 2 marker with a zero-length pipeline
// name (and a fresh checksum).
func emptyPipeline(v2 []byte, nameLenAt int) []byte {
	n := int(binary.LittleEndian.Uint16(v2[nameLenAt:]))
	out := append([]byte(nil), v2[:nameLenAt]...)
	out = binary.LittleEndian.AppendUint16(out, 0)
	return append(out, v2[nameLenAt+lenPrefixBytes+n:]...)
}

func TestMarkerOriginRefusedByEncoder(t *testing.T) {
	_, _, ix := markerPair(t)
	for name, o := range map[string]Origin{
		"zero WAL id":        {Pipeline: "a"},
		"no pipeline":        {WAL: goldenOrigin.WAL},
		"pipeline too long":  {WAL: goldenOrigin.WAL, Pipeline: strings.Repeat("p", PipelineBytesMax+1)},
		"pipeline not UTF-8": {WAL: goldenOrigin.WAL, Pipeline: "\xff"},
	} {
		with := *ix
		with.Origin = o
		if _, err := EncodeMarker(&with); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: EncodeMarker = %v, want ErrInvalid", name, err)
		}
	}
}

func TestParseWALID(t *testing.T) {
	id := goldenOrigin.WAL
	got, err := ParseWALID(id.String())
	if err != nil || got != id {
		t.Fatalf("ParseWALID(%s) = %v, %v", id, got, err)
	}
	for _, bad := range []string{"", "00", strings.Repeat("0", 32), strings.Repeat("g", 32), id.String() + "0"} {
		if _, err := ParseWALID(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseWALID(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}
