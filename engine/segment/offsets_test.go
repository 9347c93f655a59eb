package segment

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func drawOffsets(t *rapid.T, label string) Offsets {
	keys := rapid.SliceOfNDistinct(rapid.StringOfN(rapid.RuneFrom([]rune("abcdef")), 1, 4, -1), 0, 12, rapid.ID[string]).Draw(t, label+".keys")
	var o Offsets
	for _, k := range keys {
		o = o.Advance(k, rapid.Uint64Range(0, 20).Draw(t, label+".value"))
	}
	return o
}

func TestOffsetsAdvance(t *testing.T) {
	var o Offsets
	o = o.Advance("b", 5)
	o = o.Advance("a", 9)
	o = o.Advance("b", 3) // lower: kept at 5
	o = o.Advance("c", 1)
	o = o.Advance("c", 7)
	want := Offsets{{"a", 9}, {"b", 5}, {"c", 7}}
	if !slices.Equal(o, want) {
		t.Fatalf("got %v, want %v", o, want)
	}
	if v, ok := o.Get("b"); !ok || v != 5 {
		t.Fatalf("Get(b) = %d, %v", v, ok)
	}
	if _, ok := o.Get("z"); ok {
		t.Fatal("Get(z) found a missing key")
	}
	if !o.Covers(Offsets{{"a", 9}, {"c", 2}}) || o.Covers(Offsets{{"a", 10}}) || o.Covers(Offsets{{"q", 0}}) {
		t.Fatal("Covers disagrees with the entries")
	}
}

func TestOffsetsMaxMergeLaws(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := drawOffsets(t, "a"), drawOffsets(t, "b"), drawOffsets(t, "c")
		ab, ba := MaxMerge(a, b), MaxMerge(b, a)
		if !slices.Equal(ab, ba) {
			t.Fatalf("not commutative: %v vs %v", ab, ba)
		}
		if l, r := MaxMerge(MaxMerge(a, b), c), MaxMerge(a, MaxMerge(b, c)); !slices.Equal(l, r) {
			t.Fatalf("not associative: %v vs %v", l, r)
		}
		if aa := MaxMerge(a, a); !slices.Equal(aa, a) {
			t.Fatalf("not idempotent: %v vs %v", aa, a)
		}
		if err := ab.Validate(); err != nil {
			t.Fatalf("merge broke the invariant: %v", err)
		}
		if !ab.Covers(a) || !ab.Covers(b) {
			t.Fatalf("merge %v does not cover its inputs", ab)
		}
	})
}

// Same logical offsets, built in any order, encode to the same bytes, and
// decode back to themselves.
func TestOffsetsCanonicalRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := drawOffsets(t, "o")
		shuffled := rapid.Permutation(slices.Clone(o)).Draw(t, "order")
		var rebuilt Offsets
		for _, e := range shuffled {
			rebuilt = rebuilt.Advance(e.Key, e.Value)
		}
		b1, err := AppendOffsets(nil, o)
		if err != nil {
			t.Fatal(err)
		}
		b2, _ := AppendOffsets(nil, rebuilt)
		if !bytes.Equal(b1, b2) {
			t.Fatalf("same offsets, different bytes:\n%x\n%x", b1, b2)
		}
		if len(b1) != o.encodedLen() {
			t.Fatalf("encodedLen %d, encoded %d", o.encodedLen(), len(b1))
		}
		got, err := DecodeOffsets("t", b1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, o) {
			t.Fatalf("round trip: got %v, want %v", got, o)
		}
	})
}

func TestOffsetsRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		in   Offsets
		want error
	}{
		{"empty key", Offsets{{"", 1}}, ErrInvalid},
		{"unsorted", Offsets{{"b", 1}, {"a", 1}}, ErrInvalid},
		{"duplicate", Offsets{{"a", 1}, {"a", 2}}, ErrInvalid},
		{"long key", Offsets{{string(make([]byte, OffsetKeyBytesMax+1)), 1}}, ErrInvalid},
		{"too many", make(Offsets, OffsetsEntriesMax+1), ErrTooLarge},
	} {
		if _, err := AppendOffsets(nil, c.in); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	good, _ := AppendOffsets(nil, Offsets{{"a", 1}, {"b", 2}})
	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"truncated count", good[:2]},
		{"truncated entry", good[:len(good)-3]},
		{"trailing byte", append(slices.Clone(good), 0)},
		{"count past end", []byte{0xff, 0xff, 0, 0}},
		{"unsorted", func() []byte {
			b := slices.Clone(good)
			b[6], b[6+11] = 'b', 'a'
			return b
		}()},
	} {
		if _, err := DecodeOffsets(c.name, c.in, 0); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", c.name, err)
		}
	}
}
