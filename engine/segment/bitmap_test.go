package segment

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func drawBitmap(t *rapid.T, n int, label string) *Bitmap {
	b := NewBitmap(n)
	if n == 0 {
		return b
	}
	for _, i := range rapid.SliceOf(rapid.IntRange(0, n-1)).Draw(t, label) {
		b.Set(SliceOrdinal(i))
	}
	return b
}

// Merge is an OR: it never clears a bit, it is commutative and idempotent,
// and the result is all-set exactly when every bit is set in some input.
func TestBitmapMergeOnlySets(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 70).Draw(t, "n")
		a, b := drawBitmap(t, n, "a"), drawBitmap(t, n, "b")
		ab := a.Clone()
		if err := ab.Merge(b); err != nil {
			t.Fatal(err)
		}
		ba := b.Clone()
		_ = ba.Merge(a)
		for i := range n {
			o := SliceOrdinal(i)
			if ab.IsSet(o) != (a.IsSet(o) || b.IsSet(o)) {
				t.Fatalf("bit %d: merge %v, inputs %v %v", i, ab.IsSet(o), a.IsSet(o), b.IsSet(o))
			}
		}
		if string(ab.Encode()) != string(ba.Encode()) {
			t.Fatal("merge is not commutative")
		}
		again := ab.Clone()
		_ = again.Merge(ab)
		if string(again.Encode()) != string(ab.Encode()) {
			t.Fatal("merge is not idempotent")
		}
		if ab.AllSet() != (ab.Count() == n) {
			t.Fatalf("AllSet %v with %d of %d bits", ab.AllSet(), ab.Count(), n)
		}
	})
}

func TestBitmapRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 200).Draw(t, "n")
		b := drawBitmap(t, n, "bits")
		got, err := DecodeBitmap("t", b.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if got.Len() != n || string(got.Encode()) != string(b.Encode()) {
			t.Fatalf("round trip changed the bitmap")
		}
	})
}

func TestBitmapMergeLengthMismatch(t *testing.T) {
	a, b := NewBitmap(3), NewBitmap(4)
	b.Set(0)
	if err := a.Merge(b); !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
	if a.Count() != 0 {
		t.Fatal("failed merge changed the bitmap")
	}
}

func TestBitmapAllSet(t *testing.T) {
	b := NewBitmap(10)
	for i := range 10 {
		if b.AllSet() {
			t.Fatalf("all set with %d of 10 bits", i)
		}
		b.Set(SliceOrdinal(i))
	}
	if !b.AllSet() {
		t.Fatal("not all set with every bit set")
	}
	if !NewBitmap(0).AllSet() {
		t.Fatal("an empty bitmap has nothing left to apply")
	}
}

func TestBitmapRejects(t *testing.T) {
	b := NewBitmap(5)
	b.Set(1)
	good := b.Encode()
	// A bit past bit_count, with a checksum that matches, is still refused.
	stray := NewBitmap(8)
	stray.Set(6)
	strayEnc := stray.Encode()
	strayEnc[6] = 5 // bit_count 5: bit 6 is past the end
	strayEnc = resum(strayEnc)
	for _, c := range []struct {
		name string
		in   []byte
		want error
	}{
		{"stray bit", strayEnc, ErrCorrupt},
		{"bad magic", withSum(append([]byte("SCBX"), good[4:len(good)-32]...)), ErrCorrupt},
		{"new version", withSum(append([]byte("SCBL\x02\x00"), good[6:len(good)-32]...)), ErrUnsupportedVersion},
		{"count past bits", withSum(append([]byte("SCBL\x01\x00\x40\x00\x00\x00"), good[10:len(good)-32]...)), ErrTruncated},
		{"too many bits", withSum(append([]byte("SCBL\x01\x00\xff\xff\xff\x00"), good[10:len(good)-32]...)), ErrCorrupt},
		{"short", good[:8], ErrTruncated},
	} {
		if _, err := DecodeBitmap(c.name, c.in); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

// No bit is ever set at or past Len (the bitmap's INVARIANT): a caller
// that asks for one, or for a bitmap of an impossible size, breaks the
// API's contract, and the call panics naming the values.
func TestBitmapContract(t *testing.T) {
	for _, c := range []struct {
		name, want string
		call       func()
	}{
		{"set past len", "set bit 5 of 5", func() { NewBitmap(5).Set(5) }},
		{"test past len", "test bit 8 of 8", func() { NewBitmap(8).IsSet(8) }},
		{"negative size", "bitmap of -1 bits", func() { NewBitmap(-1) }},
		{"size past limit", "bitmap of 16385 bits, limit 16384", func() { NewBitmap(PartsMax + 1) }},
	} {
		func() {
			defer func() {
				if msg, _ := recover().(string); !strings.Contains(msg, c.want) {
					t.Errorf("%s: recovered %q, want %q", c.name, msg, c.want)
				}
			}()
			c.call()
		}()
	}
	b := NewBitmap(9)
	b.Set(8)
	if b.bits[1] != 1 || b.Count() != 1 {
		t.Fatalf("bit 8 of 9: bytes %v", b.bits)
	}
}
