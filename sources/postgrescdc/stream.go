package postgrescdc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// streamer receives a session's change stream. One goroutine runs it
// and alone uses the replication connection; flights run beside it.
type streamer struct {
	*session
	rels   map[uint32]relation
	tx     txState
	acc    accumulated
	flight *flight
	// confirmed is the position to confirm to the slot; it starts at the
	// slot's confirmed_flush_lsn.
	// INVARIANT: it never decreases, and every transaction that ends at
	// or before it has all its chunks acked (or had them before).
	confirmed pglogrepl.LSN
	// sent: confirmed as of the last status update, sent at lastStatus.
	sent       pglogrepl.LSN
	lastStatus time.Time
	// askedAt: when a once Run last asked the server for a keepalive.
	askedAt time.Time
}

// stream starts replication from the slot's confirmed position and runs
// until ctx ends (errStopped), the session must be set up again
// (errResync) or something fails. A flight in progress is waited for
// and landed before it returns: what it acked is recorded, and
// confirmed if the flight was acked whole.
func (sess *session) stream(ctx context.Context) (err error) {
	st := &streamer{session: sess, rels: map[uint32]relation{}, confirmed: sess.slot.confirmed}
	st.tx.lastEnd = sess.slot.confirmed
	st.src.stats.confirmed.Store(uint64(st.confirmed))
	args := []string{"proto_version '1'", "publication_names '" + sess.src.cfg.Publication + "'"}
	err = pglogrepl.StartReplication(ctx, sess.repl, sess.src.cfg.Slot, st.confirmed,
		pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication, PluginArgs: args})
	if err != nil {
		return fmt.Errorf("start replication from slot %s at %s: %w", sess.src.cfg.Slot, st.confirmed, err)
	}
	st.src.cfg.Logger.Info("postgrescdc: streaming", "slot", sess.src.cfg.Slot, "from", st.confirmed.String(),
		"tables", len(sess.tables))
	st.lastStatus = time.Now()
	defer func() { err = st.stop(ctx, err) }()
	for {
		if err := st.step(ctx); err != nil {
			return err
		}
	}
}

// step does one thing that is due: land a finished flight, launch the
// next, confirm, send a status update, wait for a flight when the
// buffer is full, or receive a message.
func (st *streamer) step(ctx context.Context) error {
	now := time.Now()
	if st.flight != nil && st.flight.finished() {
		if err := st.land(); err != nil {
			return err
		}
	}
	if st.flight == nil {
		switch {
		case st.acc.rows == 0:
			// Nothing received waits for an ack: every transaction
			// received whole is acked.
			st.confirmTo(st.tx.lastEnd)
		case st.flushDue(now):
			st.launch(ctx)
		}
	}
	if st.onceReached() {
		return errOnceReached // stop lands the flight in progress
	}
	ask := st.onceAskDue(now)
	if ask || st.sent < st.confirmed || now.Sub(st.lastStatus) >= st.statusEvery {
		if err := st.sendStatus(ctx, ask); err != nil {
			return err
		}
	}
	if st.bufferFull() {
		return st.waitFlight(ctx)
	}
	return st.receive(ctx)
}

func (st *streamer) flushDue(now time.Time) bool {
	return st.acc.rows > 0 && (st.acc.full || st.bufferFull() || now.Sub(st.acc.since) >= st.src.cfg.FlushInterval)
}

func (st *streamer) bufferFull() bool {
	return st.acc.rows >= st.src.cfg.BufferRows || st.acc.bytes >= st.src.cfg.BufferBytes
}

// idle: nothing received is unacked, and no transaction is open.
func (st *streamer) idle() bool { return st.flight == nil && st.acc.rows == 0 && !st.tx.open }

// confirmTo raises confirmed to lsn. REQUIRES: every transaction ending
// at or before lsn is acked.
func (st *streamer) confirmTo(lsn pglogrepl.LSN) {
	if lsn > st.confirmed {
		st.confirmed = lsn
		st.src.stats.confirmed.Store(uint64(lsn))
	}
}

// sendStatus tells the server the confirmed position: written, flushed
// and applied alike, as the source holds nothing it has not had acked;
// ask asks for a keepalive in reply (once.go).
func (st *streamer) sendStatus(ctx context.Context, ask bool) error {
	c := st.confirmed
	err := pglogrepl.SendStandbyStatusUpdate(ctx, st.repl, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: c, WALFlushPosition: c, WALApplyPosition: c, ReplyRequested: ask,
	})
	if err != nil {
		return fmt.Errorf("send status update: %w", err)
	}
	st.sent, st.lastStatus = c, time.Now()
	if ask {
		st.askedAt = st.lastStatus
	}
	return nil
}

// waitFlight waits, without reading, for the flight in progress or for
// the next status update.
func (st *streamer) waitFlight(ctx context.Context) error {
	if st.flight == nil {
		panic("postgrescdc: buffer full with no flight in progress")
	}
	t := time.NewTimer(time.Until(st.lastStatus.Add(st.statusEvery)))
	defer t.Stop()
	select {
	case <-st.flight.done:
	case <-t.C:
	case <-ctx.Done():
		return errStopped
	}
	return nil
}

// receive handles the next message, or returns nil once something else
// is due: a status update, a flush, the flight landing.
func (st *streamer) receive(ctx context.Context) error {
	deadline := st.lastStatus.Add(st.statusEvery)
	if st.flight == nil && st.acc.rows > 0 {
		deadline = minTime(deadline, st.acc.since.Add(st.src.cfg.FlushInterval))
	}
	if st.src.cfg.Once && st.idle() {
		deadline = minTime(deadline, st.askedAt.Add(onceAskEvery)) // the next ask (once.go)
	}
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if st.flight != nil {
		defer context.AfterFunc(st.flight.wake, cancel)()
	}
	msg, err := st.repl.ReceiveMessage(rctx)
	if err != nil {
		if ctx.Err() != nil {
			return errStopped
		}
		if rctx.Err() != nil {
			return nil // interrupted on purpose: the connection stays usable
		}
		return fmt.Errorf("receive: %w", err)
	}
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		return st.onCopyData(m.Data)
	case *pgproto3.ErrorResponse:
		return fmt.Errorf("stream: %w", pgconn.ErrorResponseToPgError(m))
	case *pgproto3.CopyDone:
		return errors.New("stream: the server ended it")
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// onCopyData handles a keepalive or a WAL message.
func (st *streamer) onCopyData(data []byte) error {
	if len(data) == 0 {
		return invariantf("an empty replication message")
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		k, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return invariantf("keepalive: %v", err)
		}
		st.src.serverAt(k.ServerWALEnd)
		if st.idle() {
			st.confirmTo(k.ServerWALEnd)
		}
		if k.ReplyRequested {
			st.lastStatus = time.Time{} // answer at the next step
		}
		return nil
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return invariantf("XLogData: %v", err)
		}
		st.src.serverAt(x.ServerWALEnd)
		return st.onMessage(x.WALData, x.WALStart)
	}
	return invariantf("replication message of type %q", data[0])
}

// onMessage decodes and applies one pgoutput message. A change's bytes
// are copied first: its values outlive the connection's read buffer.
func (st *streamer) onMessage(data []byte, walStart pglogrepl.LSN) error {
	if len(data) > 0 && (data[0] == 'I' || data[0] == 'U' || data[0] == 'D') {
		data = bytes.Clone(data)
	}
	m, err := decodeMessage(data)
	if err != nil {
		return invariantf("at %s: %v", walStart, err)
	}
	if err := st.apply(m, walStart); err != nil && st.tx.open {
		return fmt.Errorf("in the transaction committed at %s: %w", st.tx.commit, err)
	} else if err != nil {
		return err
	}
	return nil
}

// apply applies one decoded message.
func (st *streamer) apply(m any, walStart pglogrepl.LSN) error {
	switch m := m.(type) {
	case msgBegin:
		return st.onBegin(m)
	case msgCommit:
		return st.onCommit(m)
	case msgRelation:
		return st.onRelation(m)
	case msgChange:
		return st.onChange(m, walStart)
	case msgTruncate:
		return st.onTruncate(m)
	}
	return nil
}

// stop ends streaming: it waits for the flight in progress and lands
// it, confirming what it acked if it can still tell the server, and
// drops what was not yet in a flight (the next session receives it
// again) — unless the stream failed on a change the source cannot
// represent (ErrStream): then everything before it is flushed too, so
// that the slot stops right before the transaction at fault. It returns
// err, or landing's error if err is nil or errStopped.
func (st *streamer) stop(ctx context.Context, err error) error {
	drain := errors.Is(err, ErrStream)
	for st.flight != nil || drain && st.acc.rows > 0 {
		if st.flight == nil {
			st.launch(ctx)
		}
		<-st.flight.done
		if landErr := st.land(); landErr != nil {
			if err == nil || errors.Is(err, errStopped) && !errors.Is(landErr, errStopped) {
				err = landErr
			}
			break
		}
	}
	if drain && st.flight == nil && st.acc.rows == 0 {
		st.confirmTo(st.tx.lastEnd)
	}
	if st.sent < st.confirmed {
		_ = st.sendStatus(context.WithoutCancel(ctx), false)
	}
	if errors.Is(err, errOnceReached) {
		st.endCopy()
	}
	for _, t := range st.acc.tables {
		releaseChunks(t.pending)
		t.pending = nil
	}
	return err
}
