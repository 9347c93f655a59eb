package postgrescdc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// With Config.Once a Run ends on its own: its first session reads the
// server's WAL position (pg_current_wal_lsn(), the once mark) right
// after setting up — the slot exists by then, so its snapshot, if one is
// taken, sees every transaction committed before the mark or streams
// it — and Run returns nil once the position confirmed to the slot
// reaches the mark. Confirmation follows acks only (streamer.confirmTo),
// so by then every change committed before the mark is acked, and the
// flight in progress is landed before the session ends (streamer.stop).
// Changes received after the mark and not yet acked are dropped
// unconfirmed: the next Run receives them again.
//
// A change-less stretch of WAL (another database's writes, a
// checkpoint) is confirmed from keepalives, whose WAL end the source
// confirms while it holds nothing unacked; a once Run waiting for the
// mark asks the server for one at most every onceAskEvery (the
// ReplyRequested of a status update), rather than waiting for the
// server's own, which come at half its wal_sender_timeout.
//
// Before Run returns nil it ends the replication COPY (endCopy): the
// server reads a connection's messages in order, so its answer to
// CopyDone means it has taken in the last status update, and the slot
// reads confirmed up to the mark as soon as Run returns — not some
// moments later, when a cron job's next step may already look.

// onceAskEvery bounds how often a once Run asks the server for a
// keepalive.
const onceAskEvery = 100 * time.Millisecond

// errOnceReached: the slot is confirmed up to the once mark; Run returns
// nil.
var errOnceReached = errors.New("postgrescdc: once: confirmed up to the mark")

// readOnceMark reads the once mark, the first time a Run's session asks.
func (s *Source) readOnceMark(ctx context.Context, conn *pgx.Conn) error {
	if !s.cfg.Once || s.onceMark != 0 {
		return nil
	}
	var text string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&text); err != nil {
		return fmt.Errorf("read the server's WAL position (pg_current_wal_lsn) for a once run: %w", err)
	}
	lsn, err := pglogrepl.ParseLSN(text)
	if err != nil || lsn == 0 {
		return invariantf("the server's WAL position %q: want a position above 0/0 (%v)", text, err)
	}
	s.onceMark = lsn
	s.cfg.Logger.Info("postgrescdc: once: capturing up to the server's WAL position at start", "slot", s.cfg.Slot, "mark", lsn.String())
	return nil
}

// onceEndCopyWait bounds the CopyDone exchange that ends a once Run.
const onceEndCopyWait = 10 * time.Second

// endCopy ends the replication COPY and waits for the server's answer,
// at most onceEndCopyWait. If that fails the slot still takes the
// confirmation when the server reads it, and if it never does the next
// Run receives those changes again and the host's offsets drop them: a
// warning, not a failed run.
func (st *streamer) endCopy() {
	conn := st.repl.Conn()
	if err := conn.SetDeadline(time.Now().Add(onceEndCopyWait)); err == nil {
		defer func() { _ = conn.SetDeadline(time.Time{}) }()
	}
	if _, err := pglogrepl.SendStandbyCopyDone(context.Background(), st.repl); err != nil {
		st.src.cfg.Logger.Warn("postgrescdc: once: ending replication did not complete; the slot takes the confirmation when the server reads it",
			"slot", st.src.cfg.Slot, "confirmed", st.confirmed.String(), "error", err)
	}
}

// onceReached reports whether a once Run has the slot confirmed up to
// its mark.
func (st *streamer) onceReached() bool {
	return st.src.cfg.Once && st.confirmed >= st.src.onceMark
}

// onceAskDue reports whether a once Run waiting for its mark, with
// nothing unacked, should ask the server for a keepalive now.
func (st *streamer) onceAskDue(now time.Time) bool {
	return st.src.cfg.Once && st.idle() && !st.onceReached() && now.Sub(st.askedAt) >= onceAskEvery
}
