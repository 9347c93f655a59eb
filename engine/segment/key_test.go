package segment

import (
	"bytes"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

func drawKey(t *rapid.T) PartitionKey {
	field := func(label string, minLen int) string {
		return rapid.StringOfN(rapid.Rune(), minLen, 12, KeyFieldBytesMax).Draw(t, label)
	}
	k := PartitionKey{
		SinkRef:   field("sink_ref", 1),
		Namespace: field("namespace", 1),
		Partition: field("partition", 0),
		Bucketed:  rapid.Bool().Draw(t, "bucketed"),
		Schema:    SchemaFingerprint(rapid.Uint64().Draw(t, "schema")),
	}
	if k.Bucketed {
		k.BucketUnixMs = rapid.Int64().Draw(t, "bucket")
	}
	return k
}

// AppendKey and DecodeKey are the exported wire form of a key: a round
// trip gives the key back and reports exactly the bytes it took, leaving
// what follows to the caller.
func TestKeyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := drawKey(t)
		if err := k.Validate(); err != nil {
			t.Fatalf("drawn key invalid: %v", err)
		}
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "prefix")
		tail := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "tail")
		b := AppendKey(bytes.Clone(prefix), k)
		if !bytes.Equal(b[:len(prefix)], prefix) {
			t.Fatal("AppendKey changed dst")
		}
		enc := b[len(prefix):]
		got, n, err := DecodeKey("k", append(bytes.Clone(enc), tail...))
		if err != nil {
			t.Fatal(err)
		}
		if got != k || n != len(enc) {
			t.Fatalf("decoded %v (%d bytes), want %v (%d bytes)", got, n, k, len(enc))
		}
	})
}

func TestDecodeKeyRejects(t *testing.T) {
	good := AppendKey(nil, PartitionKey{SinkRef: "s", Namespace: "n", Partition: "p"})
	// s: 0..2, n: 3..5, p: 6..8, bucketed flag at 9, schema 10..17.
	mutate := func(i int, v byte) []byte {
		b := bytes.Clone(good)
		b[i] = v
		return b
	}
	for _, c := range []struct {
		name, field string
		in          []byte
		want        error
	}{
		{"empty sink_ref", "key.sink_ref", append([]byte{0, 0}, good[3:]...), ErrCorrupt},
		{"sink_ref over limit", "key.sink_ref_len", mutate(1, 0xff), ErrCorrupt},
		{"namespace past end", "key.namespace", mutate(3, 0xf0), ErrTruncated},
		{"partition not UTF-8", "key.partition", mutate(8, 0xff), ErrCorrupt},
		{"bucketed flag 2", "key.bucketed", mutate(9, 2), ErrCorrupt},
		{"schema truncated", "key.schema", good[:len(good)-1], ErrTruncated},
		{"empty", "key.sink_ref", nil, ErrTruncated},
	} {
		_, n, err := DecodeKey(c.name, c.in)
		var fe *FormatError
		if !errors.Is(err, c.want) || !errors.As(err, &fe) || fe.Field != c.field || n != 0 {
			t.Errorf("%s: got %v (n %d), want %v naming %s", c.name, err, n, c.want, c.field)
		}
	}
}
