package sim

import (
	"fmt"

	"github.com/skipprd/skipprd/engine/segment"
)

// CDC changes over a small key space (SourceSpec.Keys). Each row of a
// unit is one change — an insert, an update or a delete — of one of the
// namespace's Keys identities, so every identity is changed by many
// units, of every partition. Its order token (the source's LSN) is
// unique in the namespace, and units deliver tokens out of order:
//
//   - partitions progress independently, and a partition's unit s
//     carries tokens near every other partition's unit s;
//   - a unit's tokens run up to cdcJitterMax units ahead of its place,
//     so a later unit of the same partition may carry older ones;
//   - half the units list their rows' tokens in descending order;
//   - crashes, rewinds and retries deliver old units again.
//
// A destination that applies changes by identity and order token must
// end with each identity as its change of the highest token left it.
//
// A token, 64 bits:
//
//	 63            32 31        16 15         8 7          0
//	┌────────────────┬────────────┬────────────┬────────────┐
//	│ seq + jitter   │ seq mod 2¹⁶│ partition  │ row slot   │
//	└────────────────┴────────────┴────────────┴────────────┘
//
// Unique: two tokens alike have equal seq mod 2¹⁶ and seqs less than
// cdcJitterMax apart, hence one seq; then one partition and one row slot,
// and the slot is a bijection of the row within its unit.

// cdcJitterMax bounds how far ahead of its place a unit's tokens run.
// INVARIANT: well below 1<<16 (the uniqueness argument above).
const cdcJitterMax = 8

// cdcRowsMax is the most rows a keyed CDC unit can have: its row slot is
// one byte.
const cdcRowsMax = 256

// cdcKeysMax bounds a drawn key space: small, so that identities repeat.
const cdcKeysMax = 64

// cdcSidecar is unit u's changes: the keyed rule with SourceSpec.Keys,
// else the rule of older worlds (sidecarOf).
func cdcSidecar(spec SourceSpec, u UID, rows int) *segment.Sidecar {
	if spec.Keys == 0 {
		return sidecarOf(u, rows)
	}
	return keyedSidecar(spec.Keys, u, rows)
}

// keyedSidecar is unit u's changes over keys identities.
// REQUIRES: keys > 0, rows <= cdcRowsMax.
func keyedSidecar(keys int, u UID, rows int) *segment.Sidecar {
	if keys <= 0 || rows > cdcRowsMax {
		panic(fmt.Sprintf("sim: CDC unit %s: %d rows over %d keys (at most %d rows, at least 1 key)", u, rows, keys, cdcRowsMax))
	}
	h := mix64(uint64(u) ^ 0xcdc)
	jitter := h % cdcJitterMax
	descending := (h>>32)&1 == 1
	base := (u.seq()+jitter)<<32 | (u.seq()&0xffff)<<16 | uint64(u.partition())<<8
	s := &segment.Sidecar{Rows: make([]segment.CDCRow, rows)}
	for r := range s.Rows {
		slot := uint64(r)
		if descending {
			slot = uint64(rows - 1 - r)
		}
		c := mix64(uint64(u)*cdcRowsMax + uint64(r))
		s.Rows[r] = segment.CDCRow{
			Kind:     cdcKind(c),
			Identity: fmt.Appendf(nil, "key:%d", (c>>8)%uint64(keys)),
			Order:    base | slot,
		}
	}
	return s
}

// cdcKind: three inserts, three updates and two deletes in eight.
func cdcKind(c uint64) segment.MutationKind {
	switch c % 8 {
	case 0, 1, 2:
		return segment.Insert
	case 3, 4, 5:
		return segment.Update
	}
	return segment.Delete
}

// drawKeys gives most CDC sources a key space of 1 to cdcKeysMax
// identities (log-uniform: often a handful, so that changes collide).
func drawKeys(r *Rand, srcs []SourceSpec) {
	for i := range srcs {
		if srcs[i].CDC && r.Chance(0.7) {
			srcs[i].Keys = int(logUniform(r, 1, cdcKeysMax+1))
		}
	}
}
