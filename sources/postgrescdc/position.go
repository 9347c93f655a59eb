package postgrescdc

import (
	"fmt"

	"github.com/jackc/pglogrepl"
)

// Position is where a chunk of one table's changes lies in the stream:
// the commit LSN of its transaction and the chunk's index among that
// transaction's chunks of the table. It is the value of the table's
// offset key.
//
//	 63                                 16 15               0
//	+-------------------------------------+------------------+
//	| commit LSN (48 bits)                | chunk index      |
//	+-------------------------------------+------------------+
//
// Transactions arrive in commit order, so positions of one table only
// grow along the stream, and a replay from any earlier point produces
// the same positions for the same chunks (the chunk cut depends on the
// transaction's changes alone).
type Position uint64

const (
	chunkIndexBits = 16
	// ChunksPerTxMax bounds the chunks of one table in one transaction.
	ChunksPerTxMax = 1 << chunkIndexBits
	// CommitLSNLimit: a commit LSN must be below it to fit a Position
	// (256 TiB of WAL).
	CommitLSNLimit = pglogrepl.LSN(1) << (64 - chunkIndexBits)
)

// packPosition returns the position of chunk index of the transaction
// committed at commit, or an error (ErrInvariant) when either does not
// fit: the source fails closed rather than wrap.
func packPosition(commit pglogrepl.LSN, index int) (Position, error) {
	if commit >= CommitLSNLimit {
		return 0, invariantf("commit LSN %s is at or above 2^48, beyond what a position holds", commit)
	}
	if index < 0 || index >= ChunksPerTxMax {
		return 0, invariantf("transaction committed at %s: chunk index %d outside 0..%d (raise chunk rows or chunk bytes)",
			commit, index, ChunksPerTxMax-1)
	}
	return Position(uint64(commit)<<chunkIndexBits | uint64(index)), nil
}

// Commit returns the commit LSN of p's transaction.
func (p Position) Commit() pglogrepl.LSN { return pglogrepl.LSN(p >> chunkIndexBits) }

// Index returns p's chunk index.
func (p Position) Index() int { return int(p & (ChunksPerTxMax - 1)) }

func (p Position) String() string { return fmt.Sprintf("%s#%d", p.Commit(), p.Index()) }

// Snapshot offsets: the value of a table's snapshot key, in one of two
// schemes told apart by bit 62, with bit 63 set on a snapshot's last unit
// (done) in both:
//
//	 63   62   61                32 31                       0
//	+----+----+--------------------+--------------------------+
//	|done| 0  | attempt (30 bits)  | unit number (from 1)     |  redo
//	+----+----+--------------------+--------------------------+
//	|done| 1  | key + 2^61 (62 bits)                          |  by key
//	+----+----+-----------------------------------------------+
//
// By key: a table whose replica-identity key is one int2, int4 or int8
// column, all of whose keys lie in snapshotKeyMin..snapshotKeyMax, is
// read in key order, and each unit's value holds the last key in it
// (the field 0, key −2^61, is "before every key": an empty table's done
// unit). A snapshot cut short resumes after that key (doc.go, Snapshot),
// so its values grow with the keys: strictly, unit by unit, across
// resumptions too.
//
// Redo: any other table. Each snapshot of it is a new attempt, numbered
// one above the recovered value's, so its units all lie above whatever
// an interrupted attempt had committed: a redone snapshot is ingested in
// full, never skipped by position (rows may sit elsewhere in a later
// snapshot).
//
// Order: every by-key value lies above every redo value of the same
// done bit (bit 62), so a snapshot an older version cut short (which
// had only the redo scheme) is taken again by key; a done value lies
// above every value not done. An older version allowed attempts up to
// 2^31−1; one at or above 2^30 (as many interrupted snapshots of one
// table) would read as a key — a count never reached.
const (
	snapshotDone  = uint64(1) << 63
	snapshotKeyed = uint64(1) << 62
	// snapshotBefore is the by-key value before every key.
	snapshotBefore     = snapshotKeyed
	snapshotAttemptMax = 1<<30 - 1
	snapshotUnitMax    = 1<<32 - 1
	snapshotKeyBias    = 1 << 61
	// snapshotKeyMin and snapshotKeyMax bound the keys a by-key value
	// holds; a table with a key outside them takes the redo scheme.
	snapshotKeyMin = -snapshotKeyBias + 1
	snapshotKeyMax = snapshotKeyBias - 1
)

// nextSnapshotAttempt returns the attempt after the one recovered holds
// (a redo value, or none: 0).
func nextSnapshotAttempt(recovered uint64) (uint64, error) {
	if recovered&snapshotKeyed != 0 {
		return 0, invariantf("snapshot offset %#x is by key, not an attempt", recovered)
	}
	a := (recovered &^ snapshotDone) >> 32
	if a >= snapshotAttemptMax {
		return 0, invariantf("snapshot attempt %d is the last one an offset holds", a)
	}
	return a + 1, nil
}

// snapshotValue is the redo value of unit n (from 1) of attempt a.
func snapshotValue(a, n uint64, done bool) (uint64, error) {
	if a < 1 || a > snapshotAttemptMax || n < 1 || n > snapshotUnitMax {
		return 0, invariantf("snapshot attempt %d unit %d outside 1..%d, 1..%d", a, n, snapshotAttemptMax, snapshotUnitMax)
	}
	v := a<<32 | n
	if done {
		v |= snapshotDone
	}
	return v, nil
}

// snapshotKeyValue is the by-key value of a unit whose last key is k
// (not done), or an error (ErrInvariant) for a key outside the scheme.
func snapshotKeyValue(k int64) (uint64, error) {
	if k < snapshotKeyMin || k > snapshotKeyMax {
		return 0, invariantf("snapshot key %d outside %d..%d, beyond what an offset holds", k, int64(snapshotKeyMin), int64(snapshotKeyMax))
	}
	return snapshotKeyed | uint64(k+snapshotKeyBias), nil
}

// snapshotKeyOf returns the key a by-key value holds (−2^61 for
// snapshotBefore), done or not; keyed is false for a redo value.
func snapshotKeyOf(v uint64) (k int64, keyed bool) {
	if v&snapshotKeyed == 0 {
		return 0, false
	}
	return int64(v&^(snapshotDone|snapshotKeyed)) - snapshotKeyBias, true
}

// chunkingValue records the chunk cut a slot's positions were made with:
// ChunkRows in the high 24 bits, ChunkBytes in the low 40. REQUIRES: the
// configuration is checked (both within their bounds).
func chunkingValue(rows int, bytes int64) uint64 {
	if rows < 1 || rows > ChunkRowsMax || bytes < 1 || bytes > ChunkBytesMax {
		panic(fmt.Sprintf("postgrescdc: chunking %d rows %d bytes outside the checked bounds", rows, bytes))
	}
	return uint64(rows)<<40 | uint64(bytes)
}

// chunkingOf reverses chunkingValue.
func chunkingOf(v uint64) (rows int, bytes int64) {
	return int(v >> 40), int64(v & (1<<40 - 1))
}
