package postgrescdc

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/skipprd/skipprd/engine/segment"
)

func TestPackPosition(t *testing.T) {
	for _, c := range []struct {
		name   string
		commit pglogrepl.LSN
		index  int
		ok     bool
	}{
		{"first chunk", 0x16B3748, 0, true},
		{"last index", 0x16B3748, ChunksPerTxMax - 1, true},
		{"index past the last", 0x16B3748, ChunksPerTxMax, false},
		{"negative index", 0x16B3748, -1, false},
		{"largest commit", CommitLSNLimit - 1, 7, true},
		{"commit at 2^48", CommitLSNLimit, 0, false},
		{"commit far beyond", 1 << 62, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := packPosition(c.commit, c.index)
			if !c.ok {
				if !errors.Is(err, ErrInvariant) {
					t.Fatalf("packPosition(%s, %d) = %v, %v; want ErrInvariant", c.commit, c.index, p, err)
				}
				return
			}
			if err != nil || p.Commit() != c.commit || p.Index() != c.index {
				t.Fatalf("packPosition(%s, %d) = %v (%s, %d), %v", c.commit, c.index, p, p.Commit(), p.Index(), err)
			}
		})
	}
}

// Positions order by commit, then by index: every chunk of a later
// transaction lies above every chunk of an earlier one.
func TestPositionOrder(t *testing.T) {
	earlierLast, _ := packPosition(0x1000, ChunksPerTxMax-1)
	laterFirst, _ := packPosition(0x1001, 0)
	a, _ := packPosition(0x1001, 1)
	if !(earlierLast < laterFirst && laterFirst < a) {
		t.Fatalf("positions %v %v %v out of order", earlierLast, laterFirst, a)
	}
}

// Each snapshot attempt lies above every value of the attempts before,
// done or not, and its done value above all its own.
func TestSnapshotValues(t *testing.T) {
	a1, err := nextSnapshotAttempt(0)
	if err != nil || a1 != 1 {
		t.Fatalf("first attempt %d, %v", a1, err)
	}
	last, _ := snapshotValue(a1, snapshotUnitMax, false)
	done, _ := snapshotValue(a1, 3, true)
	if done <= last {
		t.Fatalf("done value %x not above the attempt's last %x", done, last)
	}
	for _, recovered := range []uint64{last, done} {
		a2, err := nextSnapshotAttempt(recovered)
		if err != nil || a2 != 2 {
			t.Fatalf("attempt after %x: %d, %v", recovered, a2, err)
		}
		first, _ := snapshotValue(a2, 1, false)
		if first <= last&^snapshotDone {
			t.Fatalf("attempt 2 starts at %x, not above attempt 1's %x", first, last)
		}
	}
	for _, bad := range [][2]uint64{{0, 1}, {1, 0}, {snapshotAttemptMax + 1, 1}, {1, snapshotUnitMax + 1}} {
		if _, err := snapshotValue(bad[0], bad[1], false); !errors.Is(err, ErrInvariant) {
			t.Fatalf("snapshotValue(%d, %d): %v, want ErrInvariant", bad[0], bad[1], err)
		}
	}
	top, _ := snapshotValue(snapshotAttemptMax, 1, true)
	if _, err := nextSnapshotAttempt(top); !errors.Is(err, ErrInvariant) {
		t.Fatalf("attempt after the last: %v", err)
	}
	keyed, _ := snapshotKeyValue(1)
	if _, err := nextSnapshotAttempt(keyed); !errors.Is(err, ErrInvariant) {
		t.Fatalf("attempt after a value by key: %v", err)
	}
}

// By-key values: each key comes back; values order as their keys do,
// with snapshotBefore below all; every one lies above every redo value
// (an upgrade from a version that had only the redo scheme, mid-snapshot)
// and the redo and by-key values are told apart; done lies above every
// value not done; keys outside the scheme are refused.
func TestSnapshotKeyValues(t *testing.T) {
	keys := []int64{snapshotKeyMin, snapshotKeyMin + 1, -1 << 40, -32768, -1, 0, 1, 2, 32767, 1<<31 - 1, 1 << 40,
		1828822958374912000 /* a Snowflake id of 2024 */, snapshotKeyMax - 1, snapshotKeyMax}
	topRedo, _ := snapshotValue(snapshotAttemptMax, snapshotUnitMax, false)
	topRedoDone, _ := snapshotValue(snapshotAttemptMax, snapshotUnitMax, true)
	if k, keyed := snapshotKeyOf(snapshotBefore); !keyed || k != -snapshotKeyBias {
		t.Fatalf("snapshotBefore reads as key %d, keyed %v", k, keyed)
	}
	if snapshotBefore <= topRedo {
		t.Fatalf("snapshotBefore %#x not above the top redo value %#x", snapshotBefore, topRedo)
	}
	prev := uint64(snapshotBefore)
	for _, k := range keys {
		v, err := snapshotKeyValue(k)
		if err != nil {
			t.Fatalf("key %d: %v", k, err)
		}
		if v <= prev || v <= topRedo || v&snapshotDone != 0 {
			t.Fatalf("key %d: value %#x not above %#x and the redo values, or done", k, v, prev)
		}
		if got, keyed := snapshotKeyOf(v); !keyed || got != k {
			t.Fatalf("key %d: value %#x reads as %d (keyed %v)", k, v, got, keyed)
		}
		if got, keyed := snapshotKeyOf(v | snapshotDone); !keyed || got != k {
			t.Fatalf("key %d done: reads as %d (keyed %v)", k, got, keyed)
		}
		if v|snapshotDone <= topRedoDone {
			t.Fatalf("key %d done: %#x not above the top redo value done %#x", k, v|snapshotDone, topRedoDone)
		}
		prev = v
	}
	if top, _ := snapshotKeyValue(snapshotKeyMax); top >= snapshotDone || top|snapshotDone <= top {
		t.Fatalf("the top value by key %#x reaches the done bit", top)
	}
	for _, v := range []uint64{0, 1<<32 | 1, topRedo, topRedoDone} {
		if _, keyed := snapshotKeyOf(v); keyed {
			t.Fatalf("redo value %#x reads as by key", v)
		}
	}
	for _, k := range []int64{snapshotKeyMin - 1, -1 << 63, snapshotKeyMax + 1, 1<<63 - 1} {
		if _, err := snapshotKeyValue(k); !errors.Is(err, ErrInvariant) {
			t.Fatalf("key %d outside the scheme: %v, want ErrInvariant", k, err)
		}
	}
}

func TestChunkingValue(t *testing.T) {
	for _, c := range [][2]int64{{1, 1}, {DefaultChunkRows, DefaultChunkBytes}, {ChunkRowsMax, ChunkBytesMax}} {
		rows, bytes := chunkingOf(chunkingValue(int(c[0]), c[1]))
		if int64(rows) != c[0] || bytes != c[1] {
			t.Fatalf("chunking %v came back as %d, %d", c, rows, bytes)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("chunkingValue took rows above ChunkRowsMax")
		}
	}()
	chunkingValue(ChunkRowsMax+1, 1)
}

// The constants' relations the code relies on.
func TestLimitRelations(t *testing.T) {
	if ChunkRowsMax >= 1<<24 || ChunkBytesMax >= 1<<40 {
		t.Fatal("the chunk limits overflow chunkingValue's fields")
	}
	if UnitBytesMax > segment.BodyBytesMax/4 || DefaultUnitRows > segment.PartRowsMax {
		t.Fatal("a unit may exceed what the engine takes")
	}
	longest := tableName{strings.Repeat("s", 63), strings.Repeat("t", 63)}
	slot := strings.Repeat("x", 63)
	for _, k := range []string{streamKey(slot, longest), snapshotKey(slot, longest), chunkingKey(slot)} {
		if len(k) > segment.OffsetKeyBytesMax {
			t.Fatalf("offset key of %d bytes, limit %d", len(k), segment.OffsetKeyBytesMax)
		}
	}
	if CommitLSNLimit != 1<<48 || ChunksPerTxMax != 1<<16 {
		t.Fatal("a position is 48 bits of commit LSN and 16 of chunk index")
	}
}

// Offset keys of different kinds, tables and slots never collide, and a
// slot's own are told from another's with a common prefix.
func TestOffsetKeys(t *testing.T) {
	a, b := tableName{"public", "snapshot"}, tableName{"snapshot", "t"}
	keys := []string{streamKey("s", a), streamKey("s", b), snapshotKey("s", a), snapshotKey("s", b), chunkingKey("s"), streamKey("s2", a)}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			t.Fatalf("key %q twice", k)
		}
		seen[k] = true
	}
	view := segment.Offsets{{Key: chunkingKey("s"), Value: 1}, {Key: streamKey("s", a), Value: 2}, {Key: streamKey("s2", a), Value: 3}}
	if own := ownOffsets(view, "s"); len(own) != 2 {
		t.Fatalf("own offsets of slot s: %v", own)
	}
}
