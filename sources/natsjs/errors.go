package natsjs

import "fmt"

// MessageError is a message that cannot become a row. Run returns it:
// the messages before it are ingested, none at or after it.
type MessageError struct {
	Stream   string
	Sequence uint64
	Subject  string
	Reason   string
}

func (e *MessageError) Error() string {
	return fmt.Sprintf("nats: stream %q sequence %d (subject %q): %s", e.Stream, e.Sequence, e.Subject, e.Reason)
}

// GapError is a range of the stream's sequences removed (its limits:
// max messages, bytes or age) before the source ingested them: From up
// to, not including, To. With a subject filter some of them may have
// been other subjects' messages; the source cannot tell which.
type GapError struct {
	Stream   string
	From, To uint64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("nats: stream %q: messages at sequences %d..%d were removed by the stream's limits before they were ingested; the stream now starts at %d",
		e.Stream, e.From, e.To-1, e.To)
}

// AheadError is a stream whose last sequence is before the one the host
// recovered: the stream was deleted and created again.
type AheadError struct {
	Stream string
	Resume uint64 // the recovered sequence of the next message
	Last   uint64 // the stream's last sequence
}

func (e *AheadError) Error() string {
	return fmt.Sprintf("nats: stream %q ends at sequence %d, before the recovered %d: was it deleted and created again? Give the source a new name to read it from the start",
		e.Stream, e.Last, e.Resume)
}

type invariantError struct{ msg string }

func (e *invariantError) Error() string { return "nats source: invariant broken: " + e.msg }

func invariantf(format string, args ...any) error {
	return &invariantError{fmt.Sprintf(format, args...)}
}
