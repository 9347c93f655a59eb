package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources/messages"
)

// The source's record logic without a client: which offset key holds a
// partition, where a partition resumes against its log, and how records
// become a unit. Run uses exactly these; they are exported so that the
// simulator (cmd/simulate) can drive them on its loop, feeding records
// of its own partitioned log — the code that decides what a restart
// reads and what a unit holds is then the code the world tests, though
// franz-go's client is not.

// OffsetKey is the offset key of topic's partition (offsetKey).
func (s *Source) OffsetKey(topic string, partition int32) string {
	return offsetKey(s.cfg.Name, tp{topic, partition})
}

// Recovered is where view (the host's recovered offsets) says topic's
// partition resumes: the offset of its next record; ok false when view
// holds none.
func (s *Source) Recovered(view segment.Offsets, topic string, partition int32) (next int64, ok bool) {
	v, ok := view.Get(s.OffsetKey(topic, partition))
	return int64(v), ok
}

// Resume is where topic's partition goes on when the source expects its
// record at offset at and the broker's log holds start up to, not
// including, end: at itself; below start, the records between were
// removed before they were ingested — gap names them and, with
// OnGapSkip (logged and counted), the partition goes on at start, else
// err is the gap; past end, the log is not the one the offset was taken
// from (err an *AheadError).
func (s *Source) Resume(topic string, partition int32, at, start, end int64) (next int64, gap *GapError, err error) {
	switch {
	case at > end:
		return 0, nil, &AheadError{Topic: topic, Partition: partition, Resume: at, End: end}
	case at < start:
		g := &GapError{Topic: topic, Partition: partition, From: at, To: start}
		if err := s.gap(g); err != nil {
			return 0, g, err
		}
		return start, g, nil
	}
	return at, nil, nil
}

// Unit is the unit of recs — all of topic, each partition's in offset
// order — or, while they decode to more than the limits together or a
// record other than the first cannot be a row (messages.ErrSplit), of
// their first half, quarter, …: it returns the unit and how many of
// recs it holds (the rest wait for another unit). Errors: a
// *RecordError when the first record cannot be a row. The caller
// releases the unit's batches.
func (s *Source) Unit(topic string, recs []*kgo.Record) (engine.Unit, int, error) {
	b, n, err := s.cut(topic, recs)
	return b.unit, n, err
}

// cut is Unit with what the unit covers.
func (s *Source) cut(topic string, recs []*kgo.Record) (built, int, error) {
	for {
		b, err := s.build(topic, recs)
		if !errors.Is(err, messages.ErrSplit) {
			return b, len(recs), err
		}
		recs = recs[:len(recs)/2]
	}
}
