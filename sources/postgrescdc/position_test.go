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
