package segment

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestCheckpointRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := drawOffsets(t, "o")
		epoch := rapid.Uint64().Draw(t, "epoch")
		b, err := EncodeCheckpoint(epoch, o)
		if err != nil {
			t.Fatal(err)
		}
		gotEpoch, got, err := DecodeCheckpoint("c", b)
		if err != nil || gotEpoch != epoch || !slices.Equal(got, o) {
			t.Fatalf("round trip: epoch %d %v, err %v", gotEpoch, got, err)
		}
		bad := damage(t, b)
		if _, _, err := DecodeCheckpoint("c", bad); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("damaged checkpoint: %v", err)
		}
	})
}

// A checkpoint holds more offsets than one segment may (idempotency keys
// accumulate in it), up to its own limit.
func TestCheckpointLimits(t *testing.T) {
	var o Offsets
	for i := range OffsetsEntriesMax + 10 {
		o = append(o, Offset{Key: fmt.Sprintf("k%08d", i), Value: 1})
	}
	b, err := EncodeCheckpoint(1, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, got, err := DecodeCheckpoint("c", b); err != nil || len(got) != len(o) {
		t.Fatalf("decode %d entries: %v", len(got), err)
	}
	if _, err := EncodeCheckpoint(1, append(o, make(Offsets, CheckpointEntriesMax)...)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	seed, _ := EncodeCheckpoint(7, Offsets{{"a", 1}, {"b", 2}})
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		epoch, o, err := DecodeCheckpoint("fuzz", data)
		if err != nil {
			assertTyped(t, err)
			return
		}
		assertCanonical(t, data, func() ([]byte, error) { return EncodeCheckpoint(epoch, o) })
	})
}
