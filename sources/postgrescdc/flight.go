package postgrescdc

import (
	"context"
	"sync"

	"github.com/jackc/pglogrepl"

	"github.com/skipprd/skipprd/engine"
)

// flight is one flush: the units of every chunk accumulated until it
// started, submitted by a few workers — a table's units one at a time,
// in order, different tables at once — while the stream goes on being
// read. One flight at a time: the next starts once this one has landed,
// so a table never has two units unanswered.
type flight struct {
	tables []*flightTable
	// confirmAt: the end LSN of the last transaction received whole when
	// the flight started. Every chunk of every transaction up to it is
	// in this flight or an earlier one, so once the flight is acked the
	// slot may be confirmed up to it.
	confirmAt pglogrepl.LSN

	done  chan struct{} // closed when every worker has returned
	wake  context.Context
	awake context.CancelFunc // wakes a receive waiting for the flight

	mu  sync.Mutex
	err error // the first error; read after done
}

// flightTable is one table's part of a flight: the chunks of each unit.
// Its worker writes acked and view; the session reads them once the
// flight is done.
type flightTable struct {
	t      *table
	groups [][]*chunk
	// chunking: the first unit carries the chunking offset (the offsets
	// do not hold it yet; one table of one flight carries it).
	chunking bool
	// settle: the table's first unit since Run started; see fly.
	settle bool
	view   uint64        // settle: the host's offset for the table after the first ack
	acked  []engine.Unit // the units acked, in order
}

// launch starts a flight with everything accumulated.
func (st *streamer) launch(ctx context.Context) {
	f := &flight{confirmAt: st.tx.lastEnd, done: make(chan struct{})}
	f.wake, f.awake = context.WithCancel(context.Background())
	for _, t := range st.acc.tables {
		chunks := st.dropCovered(t, t.pending)
		if len(chunks) > 0 {
			settle := !t.settled && st.src.cfg.HostOffsets != nil
			f.tables = append(f.tables, &flightTable{t: t, groups: st.src.cutGroups(chunks), settle: settle})
		}
		t.pending, t.pendingRows = nil, 0
	}
	st.acc = accumulated{}
	st.flight = f
	if len(f.tables) == 0 {
		close(f.done) // everything was covered: nothing to submit
		f.awake()
		return
	}
	_, recorded := st.src.pos.Get(chunkingKey(st.src.cfg.Slot))
	f.tables[0].chunking = !recorded
	work := make(chan *flightTable, len(f.tables))
	for _, ft := range f.tables {
		work <- ft
	}
	close(work)
	var wg sync.WaitGroup
	for range min(len(f.tables), st.src.cfg.IngestConcurrency) {
		wg.Go(func() {
			for ft := range work {
				st.fly(ctx, f, ft)
			}
		})
	}
	go func() {
		wg.Wait()
		close(f.done)
		f.awake()
	}()
}

// fly submits one table's units in order, stopping at the first that
// fails (or at once if another table's did); the chunks' batches are
// released once the table is done with, whatever the outcome.
//
// With HostOffsets, the table's first unit since Run started is one
// chunk, and once it is
// acked the host's offset for the table is read again, every chunk it
// covers is dropped, and the rest are grouped anew. After a restart the
// host may hold, pending until they commit, units it replayed from its
// log — absent from the offsets Run was given — whose chunks this run
// receives again and groups otherwise; a unit that went past the end of
// such a unit would store the chunks they share twice. A chunk is the
// same every time: a unit of one chunk is refused while a replayed unit
// of its table is pending, then acked without being stored if that unit
// covered it, or stored if nothing did; after its ack the host's offset
// is final for whatever it replayed.
func (st *streamer) fly(ctx context.Context, f *flight, ft *flightTable) {
	defer func() {
		for _, g := range ft.groups {
			releaseChunks(g)
		}
	}()
	queue := ft.groups
	if ft.settle {
		rest := flatten(queue)
		queue = append([][]*chunk{rest[:1]}, st.src.cutGroups(rest[1:])...)
	}
	for i := 0; i < len(queue); i++ {
		if f.failed() {
			return
		}
		u := st.src.unitOf(ft.t, ft.t.streamKey, queue[i])
		if ft.chunking && i == 0 {
			u = st.src.withChunking(u)
		}
		if err := st.src.submit(ctx, st.ingest, u); err != nil {
			f.fail(err)
			return
		}
		ft.acked = append(ft.acked, u)
		if ft.settle && i == 0 {
			v, err := st.src.hostOffset(ctx, ft.t.streamKey)
			if err != nil {
				f.fail(err)
				return
			}
			ft.view = v
			queue = append(queue[:1], st.src.cutGroups(st.src.above(flatten(queue[1:]), v))...)
		}
	}
}

// flatten returns the chunks of groups in order.
func flatten(groups [][]*chunk) []*chunk {
	var out []*chunk
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// above returns the chunks above value; the others count as skipped.
// Their batches stay with the flight's groups, which release them.
func (s *Source) above(chunks []*chunk, value uint64) []*chunk {
	var out []*chunk
	for _, c := range chunks {
		if c.value > value {
			out = append(out, c)
		} else {
			s.stats.changesSkipped.Add(uint64(c.rows()))
		}
	}
	return out
}

// dropCovered returns t's chunks above its acked position, releasing
// the others (the host's offset read after a table's first ack may
// cover chunks received meanwhile).
func (st *streamer) dropCovered(t *table, chunks []*chunk) []*chunk {
	var out []*chunk
	for _, c := range chunks {
		if c.value > t.acked {
			out = append(out, c)
			continue
		}
		st.src.stats.changesSkipped.Add(uint64(c.rows()))
		c.batch.Release()
	}
	return out
}

func (f *flight) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *flight) failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err != nil
}

func (f *flight) finished() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// land records a finished flight: every acked unit advances its table's
// position and the source's offsets; then, if all were acked, the slot
// is confirmed up to confirmAt. REQUIRES: f.done is closed.
func (st *streamer) land() error {
	f := st.flight
	st.flight = nil
	for _, ft := range f.tables {
		for i, u := range ft.acked {
			st.src.acked(u)
			if ft.settle && i == 0 {
				st.src.pos = st.src.pos.Advance(ft.t.streamKey, ft.view) // the host's own view
				ft.t.settled, st.src.settled[ft.t.streamKey] = true, true
			}
			ft.t.acked, _ = st.src.pos.Get(ft.t.streamKey)
			st.src.stats.changes.Add(uint64(len(u.Sidecar.Rows)))
		}
	}
	if f.err != nil {
		return f.err
	}
	st.confirmTo(f.confirmAt)
	return nil
}
