package postgrescdc

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/engine/segment"
)

func TestIdentity(t *testing.T) {
	name := tableName{"public", "t"}
	for _, c := range []struct {
		name   string
		values [][]byte
		want   []byte
		err    bool
	}{
		{"one column", [][]byte{[]byte("42")}, []byte("\x00\x0242"), false},
		{"two columns", [][]byte{[]byte("a"), []byte("bc")}, []byte("\x00\x01a\x00\x02bc"), false},
		{"empty text is a value", [][]byte{{}}, []byte("\x00\x00"), false},
		{"NULL key", [][]byte{[]byte("1"), nil}, nil, true},
		{"at the limit", [][]byte{bytes.Repeat([]byte("k"), segment.SidecarIdentityBytesMax-2)}, nil, false},
		{"over the limit", [][]byte{bytes.Repeat([]byte("k"), segment.SidecarIdentityBytesMax-1)}, nil, true},
		{"over the limit in two", [][]byte{bytes.Repeat([]byte("k"), 2000), bytes.Repeat([]byte("k"), 2095)}, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys := make([]string, len(c.values))
			for i := range keys {
				keys[i] = "k" + string(rune('0'+i))
			}
			got, err := appendIdentity(nil, name, keys, c.values)
			if c.err {
				if !errors.Is(err, ErrStream) || !strings.Contains(err.Error(), "public.t") {
					t.Fatalf("identity %q, %v; want ErrStream naming the table", got, err)
				}
				return
			}
			if err != nil || c.want != nil && !bytes.Equal(got, c.want) || len(got) > segment.SidecarIdentityBytesMax {
				t.Fatalf("identity %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// Lengths keep column boundaries: values that concatenate alike give
// different identities.
func TestIdentityKeepsBoundaries(t *testing.T) {
	name := tableName{"public", "t"}
	a, _ := appendIdentity(nil, name, []string{"x", "y"}, [][]byte{[]byte("ab"), []byte("c")})
	b, _ := appendIdentity(nil, name, []string{"x", "y"}, [][]byte{[]byte("a"), []byte("bc")})
	if bytes.Equal(a, b) {
		t.Fatalf("(ab, c) and (a, bc) share identity %q", a)
	}
}

// The identity is made of the key columns in column order, whatever
// order the key was declared or listed in, so the snapshot (which lists
// the key from the catalog) and the stream (from the Relation message)
// agree.
func TestShapeIdentityUsesColumnOrder(t *testing.T) {
	name := tableName{"public", "t"}
	cols := []column{{"tenant", oidInt4}, {"payload", 25}, {"seq", oidInt8}}
	s1, err := newShape(name, cols, []string{"seq", "tenant"})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := newShape(name, cols, []string{"tenant", "seq"})
	if err != nil {
		t.Fatal(err)
	}
	values := [][]byte{[]byte("3"), []byte("p"), []byte("17")}
	id1, _ := s1.identity(name, values)
	id2, _ := s2.identity(name, values)
	want, _ := appendIdentity(nil, name, []string{"tenant", "seq"}, [][]byte{[]byte("3"), []byte("17")})
	if !bytes.Equal(id1, want) || !bytes.Equal(id2, want) || !s1.equal(s2) {
		t.Fatalf("identities %q %q, want %q", id1, id2, want)
	}
	if _, err := newShape(name, cols, []string{"missing"}); !errors.Is(err, ErrStream) {
		t.Fatalf("a key column the table lacks: %v", err)
	}
	if _, err := newShape(name, cols, nil); !errors.Is(err, ErrStream) {
		t.Fatalf("no key: %v", err)
	}
}
