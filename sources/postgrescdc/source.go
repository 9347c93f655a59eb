package postgrescdc

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/internal/pgurl"
)

// IngestFunc submits a unit and blocks until it is answered: nil means
// committed and acked. storage.Host.Ingest is one.
type IngestFunc func(ctx context.Context, u engine.Unit) error

// OffsetsFunc returns the host's offsets view as it is now.
// storage.Host.Offsets is one.
type OffsetsFunc func(ctx context.Context) (segment.Offsets, error)

// Source captures the changes of a Postgres database. It holds no
// durable state of its own: where it resumes is the host's offsets view
// (given to Run) and the slot's confirmed position, which it only moves
// up to what the host has acked.
type Source struct {
	cfg Config

	running atomic.Bool
	// pos: this source's entries of the offsets view Run was given,
	// advanced as units are acked, never otherwise. Run's goroutine
	// alone touches it.
	pos segment.Offsets
	// resynced: relations that made a session start again (onRelation).
	resynced map[uint32]bool
	// settled: stream keys of the tables whose first unit since Run
	// started is acked and the host's offset read after it (fly).
	settled map[string]bool
	// onceMark: with Once, the server's WAL position read by the Run's
	// first session (once.go); 0 until then.
	onceMark pglogrepl.LSN

	stats counters
}

type counters struct {
	snapshotRows, changes, changesSkipped, units, retries, sessions atomic.Uint64
	confirmed, serverEnd                                            atomic.Uint64
}

// New returns a source for cfg, or an error naming what is wrong with
// it. It connects to nothing: Run does.
func New(cfg Config) (*Source, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return &Source{cfg: cfg}, nil
}

// Stats are a source's counters since New.
type Stats struct {
	SnapshotRows uint64 // snapshot rows acked
	Changes      uint64 // change rows acked (a key update counts two)
	// ChangesSkipped: change rows received again after a restart whose
	// chunk the recovered offsets already held.
	ChangesSkipped uint64
	Units          uint64 // units acked
	Retries        uint64 // resubmissions of a unit
	// Splits: units refused for backpressure and submitted again a
	// chunk at a time (fly).
	Splits   uint64
	Sessions uint64 // connections set up (1 + restarts)
	// ConfirmedLSN: the position confirmed to the slot (or to be, at the
	// next status update); ServerLSN: the server's WAL end as it last
	// reported it; LagBytes: how far the first trails the second.
	ConfirmedLSN, ServerLSN pglogrepl.LSN
	LagBytes                uint64
}

// Stats returns the counters. Safe from any goroutine.
func (s *Source) Stats() Stats {
	st := Stats{
		SnapshotRows:   s.stats.snapshotRows.Load(),
		Changes:        s.stats.changes.Load(),
		ChangesSkipped: s.stats.changesSkipped.Load(),
		Units:          s.stats.units.Load(),
		Retries:        s.stats.retries.Load(),
		Sessions:       s.stats.sessions.Load(),
		ConfirmedLSN:   pglogrepl.LSN(s.stats.confirmed.Load()),
		ServerLSN:      pglogrepl.LSN(s.stats.serverEnd.Load()),
	}
	if st.ServerLSN > st.ConfirmedLSN {
		st.LagBytes = uint64(st.ServerLSN - st.ConfirmedLSN)
	}
	return st
}

// serverAt records a WAL position the server reported (a keepalive's is
// its WAL end; an XLogData's that of its message), for Stats.
func (s *Source) serverAt(lsn pglogrepl.LSN) {
	for {
		cur := s.stats.serverEnd.Load()
		if uint64(lsn) <= cur || s.stats.serverEnd.CompareAndSwap(cur, uint64(lsn)) {
			return
		}
	}
}

// Run captures changes until ctx ends (nil), with Once until every change
// before the server's WAL position at start is acked (nil; once.go), or
// something fails that a
// new session cannot fix: ErrSetup, ErrStream, ErrInvariant, a unit the
// host refuses for good (engine.ErrInvalidUnit, engine.ErrClosed), a
// server error other than a lost connection or an unavailable server.
// ingest submits units (Host.Ingest); offsets is the host's recovered
// view (Host.Offsets), where Run resumes. A lost connection, a server
// restarting or a slot still held by a previous connection start a new
// session after a backoff, from the acked offsets and the slot's
// confirmed position.
func (s *Source) Run(ctx context.Context, ingest IngestFunc, offsets segment.Offsets) error {
	if !s.running.CompareAndSwap(false, true) {
		return invariantf("slot %s: Run called while it runs", s.cfg.Slot)
	}
	defer s.running.Store(false)
	s.pos = ownOffsets(offsets, s.cfg.Slot)
	s.resynced, s.settled = map[uint32]bool{}, map[string]bool{}
	s.onceMark = 0
	if err := s.checkChunking(); err != nil {
		return err
	}
	if s.cfg.HostOffsets == nil {
		s.cfg.Logger.Warn("postgrescdc: no HostOffsets: after a crash of a host that replays its log, a chunk may be stored twice",
			"slot", s.cfg.Slot)
	}
	url := pgurl.Redact(s.cfg.URL)
	s.cfg.Logger.Info("postgrescdc: starting", "url", url, "slot", s.cfg.Slot, "publication", s.cfg.Publication,
		"offsets", len(s.pos))
	backoff := retryBase
	for {
		acked := s.stats.units.Load()
		err := s.session(ctx, ingest)
		switch {
		case ctx.Err() != nil || errors.Is(err, errStopped):
			return nil
		case errors.Is(err, errOnceReached):
			s.cfg.Logger.Info("postgrescdc: once: every change before the mark is acked and confirmed", "slot", s.cfg.Slot,
				"mark", s.onceMark.String(), "confirmed", pglogrepl.LSN(s.stats.confirmed.Load()).String())
			return nil
		case errors.Is(err, errResync):
			continue
		case s.fatal(err):
			return err
		}
		if s.stats.units.Load() != acked {
			backoff = retryBase // the session made progress
		}
		s.cfg.Logger.Warn("postgrescdc: session ended; starting another", "slot", s.cfg.Slot, "retry_in", backoff, "error", err)
		if s.cfg.Sleep(ctx, backoff) != nil {
			return nil
		}
		backoff = min(2*backoff, sessionRetryMax)
	}
}

// hostOffset reads the host's offset for key now (0 if it has none).
func (s *Source) hostOffset(ctx context.Context, key string) (uint64, error) {
	view, err := s.cfg.HostOffsets(context.WithoutCancel(ctx))
	if err != nil {
		return 0, fmt.Errorf("postgrescdc: read the host's offsets: %w", err)
	}
	v, _ := view.Get(key)
	return v, nil
}

// session sets up, snapshots what needs it, and streams.
func (s *Source) session(ctx context.Context, ingest IngestFunc) error {
	s.stats.sessions.Add(1)
	sess, err := s.openSession(ctx, ingest)
	if err != nil {
		return err
	}
	defer sess.close()
	if err := s.readOnceMark(ctx, sess.conn); err != nil {
		return err
	}
	if err := sess.snapshot(ctx); err != nil {
		return err
	}
	return sess.stream(ctx)
}

// checkChunking refuses to run with a chunk cut other than the one the
// recovered positions were made with: a replay would cut a partly
// ingested transaction elsewhere, and drop or repeat rows.
func (s *Source) checkChunking() error {
	v, ok := s.pos.Get(chunkingKey(s.cfg.Slot))
	if !ok {
		return nil
	}
	rows, bytes := chunkingOf(v)
	if rows != s.cfg.ChunkRows || bytes != s.cfg.ChunkBytes {
		return setupf("slot %s was captured with chunks of %d rows and %d bytes, the configuration says %d rows and %d bytes: "+
			"a slot keeps its chunking (set them back, or capture with a new slot name)", s.cfg.Slot, rows, bytes, s.cfg.ChunkRows, s.cfg.ChunkBytes)
	}
	return nil
}

// fatal reports whether err ends Run: the source's own verdicts, the
// host refusing units, and server errors other than the ones a new
// session may not meet (a lost connection, a server starting or
// stopping, lack of resources, a slot still in use).
func (s *Source) fatal(err error) bool {
	if errors.Is(err, ErrSetup) || errors.Is(err, ErrStream) || errors.Is(err, ErrInvariant) ||
		errors.Is(err, engine.ErrInvalidUnit) || errors.Is(err, errHost) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return false // the network, a timeout
	}
	switch pgErr.Code[:2] {
	case "08", "40", "53", "57", "58":
		return false
	}
	return pgErr.Code != "55006" // object in use: the slot, by a connection not yet gone
}

// Check connects once and checks the server (version, wal_level), so a
// daemon can say at start-up what is wrong instead of after its
// recovery; Run checks all of it again, and the rest of the set-up.
func (s *Source) Check(ctx context.Context) error {
	conn, err := connect(ctx, s.cfg)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	return checkServer(ctx, conn)
}
