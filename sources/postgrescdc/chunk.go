package postgrescdc

import (
	"time"

	"github.com/jackc/pglogrepl"
)

// Chunks. A transaction's changes to one table are cut, in stream
// order, into chunks: a chunk ends after ChunkRows rows, once its rows
// hold ChunkBytes bytes or more (row.bytes), before a row of another
// shape (a schema change), and at the commit. The cut depends only on
// the transaction's changes, which a replay sends again alike, so chunk
// i of a transaction is the same rows every time, at Position(commit, i).
// A chunk at or below the table's acked position was ingested before
// and is dropped whole; any other is ingested whole, in one unit.

// txState is the transaction being received.
type txState struct {
	open    bool
	commit  pglogrepl.LSN // the open transaction's commit LSN (from Begin)
	lastWAL pglogrepl.LSN // WALStart of its latest change
	// prevCommit: the commit LSN of the transaction before.
	// INVARIANT: transactions arrive in strictly increasing commit LSN.
	prevCommit pglogrepl.LSN
	// lastEnd: the end LSN of the last transaction received whole. Every
	// chunk of every transaction up to it is closed.
	lastEnd pglogrepl.LSN
	touched []*table
}

// accumulated is what closed chunks wait for a flight: rows and bytes
// over all tables, since when, and the tables holding some.
type accumulated struct {
	rows   int
	bytes  int64
	since  time.Time
	tables []*table
	// full: some table holds UnitRows rows or more.
	full bool
}

func (st *streamer) onBegin(m msgBegin) error {
	switch {
	case st.tx.open:
		return invariantf("Begin of the transaction committed at %s inside the one committed at %s", m.commit, st.tx.commit)
	case m.commit <= st.tx.prevCommit:
		return invariantf("transaction committed at %s after one committed at %s: commits must arrive in order", m.commit, st.tx.prevCommit)
	case m.commit >= CommitLSNLimit:
		return invariantf("commit LSN %s is at or above 2^48, beyond what a position holds", m.commit)
	}
	st.tx.open, st.tx.commit, st.tx.lastWAL = true, m.commit, 0
	return nil
}

func (st *streamer) onCommit(m msgCommit) error {
	if !st.tx.open || m.commit != st.tx.commit || m.end <= m.commit {
		return invariantf("Commit at %s (end %s) for the transaction begun with commit LSN %s (open %v)",
			m.commit, m.end, st.tx.commit, st.tx.open)
	}
	for _, t := range st.tx.touched {
		if len(t.open) > 0 {
			if err := st.closeChunk(t); err != nil {
				return err
			}
		}
		t.txChunks, t.touched = 0, false
	}
	st.tx.touched = st.tx.touched[:0]
	st.tx.open, st.tx.prevCommit, st.tx.lastEnd = false, m.commit, m.end
	return nil
}

// checkChange checks a change's WALStart, its order token: within a
// transaction changes never go back, and all precede the commit.
func (st *streamer) checkChange(walStart pglogrepl.LSN) error {
	switch {
	case !st.tx.open:
		return invariantf("a change at %s outside a transaction", walStart)
	case walStart < st.tx.lastWAL || walStart == 0 || walStart >= st.tx.commit:
		return invariantf("a change at %s after one at %s, in the transaction committed at %s", walStart, st.tx.lastWAL, st.tx.commit)
	}
	st.tx.lastWAL = walStart
	return nil
}

// add appends one row of shape sh to t's open chunk, cutting the chunk
// before it (another shape) or after it (full).
func (st *streamer) add(t *table, sh *shape, r row) error {
	if !t.touched {
		t.touched = true
		st.tx.touched = append(st.tx.touched, t)
	}
	if len(t.open) > 0 && !t.openShape.equal(sh) {
		if err := st.closeChunk(t); err != nil {
			return err
		}
	}
	t.open = append(t.open, r)
	t.openShape = sh
	t.openBytes += r.bytes()
	if len(t.open) >= st.src.cfg.ChunkRows || t.openBytes >= st.src.cfg.ChunkBytes {
		return st.closeChunk(t)
	}
	return nil
}

// closeChunk closes t's open chunk at its position: dropped if the
// table's acked position covers it, else built and made pending.
func (st *streamer) closeChunk(t *table) error {
	pos, err := packPosition(st.tx.commit, t.txChunks)
	if err != nil {
		return err
	}
	t.txChunks++
	rows, sh := t.open, t.openShape
	t.open, t.openBytes = nil, 0
	if uint64(pos) <= t.acked {
		st.src.stats.changesSkipped.Add(uint64(len(rows)))
		return nil
	}
	c, err := buildChunk(st.src.cfg, t.name, sh, rows, uint64(pos))
	if err != nil {
		return err
	}
	if len(t.pending) == 0 {
		st.acc.tables = append(st.acc.tables, t)
	}
	if st.acc.rows == 0 {
		st.acc.since = time.Now()
	}
	t.pending = append(t.pending, c)
	t.pendingRows += c.rows()
	st.acc.rows += c.rows()
	st.acc.bytes += c.bytes
	st.acc.full = st.acc.full || t.pendingRows >= st.src.cfg.UnitRows
	return nil
}
