package segment

import (
	"bytes"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

func drawSidecar(t *rapid.T, rows int) *Sidecar {
	s := &Sidecar{Rows: make([]CDCRow, rows)}
	for i := range s.Rows {
		s.Rows[i] = CDCRow{
			Kind:     rapid.SampledFrom([]MutationKind{Insert, Update, Delete}).Draw(t, "kind"),
			Identity: rapid.SliceOfN(rapid.Byte(), 0, 24).Draw(t, "identity"),
			Order:    rapid.Uint64().Draw(t, "order"),
		}
	}
	return s
}

func sidecarsEqual(a, b *Sidecar) bool {
	if len(a.Rows) != len(b.Rows) {
		return false
	}
	for i := range a.Rows {
		x, y := a.Rows[i], b.Rows[i]
		if x.Kind != y.Kind || x.Order != y.Order || !bytes.Equal(x.Identity, y.Identity) {
			return false
		}
	}
	return true
}

func TestSidecarRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := drawSidecar(t, rapid.IntRange(0, 40).Draw(t, "rows"))
		b, err := AppendSidecar(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != s.encodedLen() {
			t.Fatalf("encodedLen %d, encoded %d", s.encodedLen(), len(b))
		}
		got, err := DecodeSidecar("t", b, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !sidecarsEqual(got, s) {
			t.Fatalf("round trip changed the rows")
		}
	})
}

func TestSidecarRejects(t *testing.T) {
	if _, err := AppendSidecar(nil, &Sidecar{Rows: []CDCRow{{Kind: 0}}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("kind 0: got %v, want ErrInvalid", err)
	}
	long := &Sidecar{Rows: []CDCRow{{Kind: Insert, Identity: make([]byte, SidecarIdentityBytesMax+1)}}}
	if _, err := AppendSidecar(nil, long); !errors.Is(err, ErrTooLarge) {
		t.Errorf("long identity: got %v, want ErrTooLarge", err)
	}
	good, _ := AppendSidecar(nil, &Sidecar{Rows: []CDCRow{{Insert, []byte("k1"), 7}, {Delete, nil, 8}}})
	mutate := func(i int, v byte) []byte {
		b := bytes.Clone(good)
		b[i] = v
		return b
	}
	for _, c := range []struct {
		name string
		in   []byte
		want error
	}{
		{"bad magic", mutate(0, 'X'), ErrCorrupt},
		{"new version", mutate(4, 2), ErrUnsupportedVersion},
		{"row count past end", mutate(6, 0xff), ErrCorrupt},
		{"bad kind", mutate(10, 9), ErrCorrupt},
		{"identity past end", mutate(11, 0xff), ErrTruncated},
		{"truncated", good[:len(good)-1], ErrTruncated},
		{"trailing", append(bytes.Clone(good), 0), ErrCorrupt},
		{"empty", nil, ErrTruncated},
	} {
		_, err := DecodeSidecar(c.name, c.in, 0)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}
