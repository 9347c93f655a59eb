package natsjs

import (
	"errors"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources/messages"
)

// The source's message logic without a connection: where the stream
// resumes against its sequences, and how messages become a unit. Run
// uses exactly these; they are exported so that the simulator
// (cmd/simulate) can drive them on its loop, feeding messages of its
// own log, though nats.go's client is not run there.

// Message is what the source keeps of a message.
type Message struct {
	Seq     uint64 // stream sequence
	Subject string
	At      int64 // publish time, Unix microseconds
	Value   []byte
	pending uint64 // messages of the consumer's subjects after it, when it was delivered (once.go)
	after   uint64 // delivered past this sequence, the one expected (0: it came next; jump.go)
}

// Recovered is the sequence view (the host's recovered offsets) says the
// stream resumes at; ok false when it holds none.
func (s *Source) Recovered(view segment.Offsets) (next uint64, ok bool) {
	return view.Get(s.OffsetKey())
}

// Resume is where the stream goes on when the source expects sequence
// next and the stream holds first..last: next itself; below first, the
// messages between were removed before they were ingested — gap names
// them and, with OnGapSkip (logged and counted), the stream goes on at
// first, else err is the gap; past last + 1, the stream is not the one
// the offset was taken from (err an *AheadError).
func (s *Source) Resume(next, first, last uint64) (at uint64, gap *GapError, err error) {
	switch {
	case next > last+1:
		return 0, nil, &AheadError{Stream: s.cfg.Stream, Resume: next, Last: last}
	case next < first:
		g := &GapError{Stream: s.cfg.Stream, From: next, To: first}
		if err := s.gap(g); err != nil {
			return 0, g, err
		}
		return first, g, nil
	}
	return next, nil, nil
}

// Unit is the unit of msgs, in sequence order, or — while they decode to
// more than the limits together, or a message other than the first
// cannot be a row (messages.ErrSplit) — of their first half, quarter,
// …: it returns the unit and how many of msgs it holds. Its offset is
// the sequence after its last message. Errors: a *MessageError when the
// first message cannot be a row. The caller releases the unit's
// batches.
func (s *Source) Unit(msgs []Message) (engine.Unit, int, error) {
	for {
		u, err := s.unit(msgs)
		if !errors.Is(err, messages.ErrSplit) {
			return u, len(msgs), err
		}
		msgs = msgs[:len(msgs)/2]
	}
}
