package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// With Config.Once a Run ends on its own once it has ingested every
// partition found at its start up to the partition's high watermark at
// start (with ReadCommitted its last stable offset: records past it are
// not readable yet), the mark, and had every record below the mark
// acked. Partitions and topics found later are read too, but not waited
// for; a once Run takes no Group (members split the partitions, so none
// knows them all).
//
// The offsets below a mark are not all records: a transactional
// producer writes control records (commit and abort markers), which are
// never rows, and a read-committed consumer does not get aborted ones.
// So the source asks the client for the control records too
// (kgo.KeepControlRecords), passes them over when it queues records,
// and counts a partition passed once the poller has seen any record —
// data or control — at or past the mark's last offset. A partition is
// done when it is passed and the last data record it has below the mark
// is acked (the partition's acked offset reaches it); the poller or a
// worker, whichever sees the last partition done, ends the run with
// errOnceReached. The units in flight are answered first; records
// queued past the marks are dropped unacked, and the next Run reads
// them again.

// errOnceReached: every partition found at start is ingested up to its
// mark; Run returns nil.
var errOnceReached = errors.New("kafka source: once: ingested up to the high watermarks at start")

// onceMarks is a once Run's progress; the poller and the workers share
// it.
type onceMarks struct {
	mu    sync.Mutex
	parts map[tp]*onceMark
}

// onceMark is one partition's.
type onceMark struct {
	mark  int64 // the high watermark (or last stable offset) at start
	seen  int64 // the offset after the last record the poller saw, data or control
	need  int64 // the offset after the last data record below mark the poller queued; 0: none
	acked int64 // the offset after the last record acked this Run
}

// done: the poller passed the mark and every data record below it is
// acked. REQUIRES the marks' mu.
func (m *onceMark) done() bool { return m.seen >= m.mark && m.acked >= m.need }

// onceStart reads the marks of parts, each starting at from (where its
// consumption starts; absent: at its log's start, or with StartLatest
// at its end). nil without Once; nil, nil once ctx ended.
func (s *Source) onceStart(ctx context.Context, adm *kadm.Client, parts []tp, from map[tp]int64) (*onceMarks, error) {
	if !s.cfg.Once {
		return nil, nil
	}
	var topics []string
	for _, p := range parts {
		topics = append(topics, p.topic)
	}
	list := adm.ListEndOffsets
	if s.cfg.ReadCommitted {
		list = adm.ListCommittedOffsets
	}
	ends, err := list(ctx, topics...)
	if err == nil {
		var starts kadm.ListedOffsets
		if starts, err = adm.ListStartOffsets(ctx, topics...); err == nil {
			return s.onceMarksOf(parts, from, starts, ends)
		}
	}
	if ctx.Err() != nil {
		return nil, nil
	}
	return nil, fmt.Errorf("kafka source %q: once: list the partitions' offsets: %w", s.cfg.Name, err)
}

// onceMarksOf builds the marks from the listed offsets.
func (s *Source) onceMarksOf(parts []tp, from map[tp]int64, starts, ends kadm.ListedOffsets) (*onceMarks, error) {
	o := &onceMarks{parts: map[tp]*onceMark{}}
	for _, p := range parts {
		st, en, err := listedRange(p, starts, ends)
		if err != nil {
			return nil, fmt.Errorf("kafka source %q: once: %w", s.cfg.Name, err)
		}
		at, ok := from[p]
		switch {
		case ok:
		case s.cfg.Start == StartLatest:
			at = en
		default:
			at = st
		}
		o.parts[p] = &onceMark{mark: en, seen: at}
	}
	s.cfg.Logger.Info("kafka source: once: ingesting up to the high watermarks at start", "source", s.cfg.Name,
		"partitions", len(parts), "read_committed", s.cfg.ReadCommitted)
	return o, nil
}

// saw takes a fetch of p's records, control records among them, and
// returns its data records.
func (o *onceMarks) saw(p tp, recs []*kgo.Record) []*kgo.Record {
	data := recs[:0:0]
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.parts[p] // nil: found after the start, not waited for
	for _, r := range recs {
		if !r.Attrs.IsControl() {
			data = append(data, r)
		}
		if m == nil {
			continue
		}
		m.seen = max(m.seen, r.Offset+1)
		if !r.Attrs.IsControl() && r.Offset < m.mark {
			m.need = r.Offset + 1
		}
	}
	return data
}

// movedTo records that p's consumption moved to next (a gap skipped, a
// first position found): the offsets before it will not be fetched.
func (o *onceMarks) movedTo(p tp, next int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if m := o.parts[p]; m != nil {
		m.seen = max(m.seen, next)
	}
}

// ackedTo records that p's records before next are acked.
func (o *onceMarks) ackedTo(p tp, next int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if m := o.parts[p]; m != nil {
		m.acked = max(m.acked, next)
	}
}

// over reports whether every partition is done; a nil onceMarks (not
// once) never is.
func (o *onceMarks) over() bool {
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, m := range o.parts {
		if !m.done() {
			return false
		}
	}
	return true
}
