// Package natsjs is the NATS JetStream source: it reads one stream
// (optionally only some subjects) through github.com/nats-io/nats.go's
// ordered consumer and hands its messages to the host as units, the
// stream sequence carried in the unit as a source offset. It owns
// pulling, cutting messages into units and decoding them
// (sources/messages); it owns no durable state — no durable consumer on
// the server either. Where the stream resumes is the host's offsets
// view, which only the host writes, with the rows; the daemon hands Run
// storage.Host.ResumeOffsets.
//
// The offset key is "nats/{Name}/{Stream}", its value the stream
// sequence of the next message: the unit's last message's + 1. A
// recovered sequence below the stream's first (its limits removed
// messages: max messages, bytes or age) is a *GapError naming the range,
// which stops the source (OnGapStop) or is logged and counted (OnGapSkip);
// while it runs, a delivered sequence past the one expected while the
// stream's first sequence moved past it too is the same gap, named before
// anything past it is ingested (jump.go: one stream info request per
// batch of messages taken that holds such a jump, retried until answered). A recovered
// sequence past the stream's last + 1 is an *AheadError (the stream was
// created again). A stream without a recovered sequence starts at its
// first message (StartFirst) or with new ones (StartNew).
//
// One unit is in flight at a time (the stream has one offset key), of
// up to Config.UnitBytes of values; messages pulled and not yet acked
// are held up to Config.BufferBytes, past which the source stops pulling.
// Every row gets the message's subject, stream sequence and publish time
// (ColSubject, ColSequence, ColTimestamp). A value that cannot be a row is
// a *MessageError naming the sequence and subject, and stops the source.
//
// Invariants, each checked where it could break: sequences only grow,
// within a unit and from the poller (run.message, Source.unit); the
// queue's bytes never go below zero (queue.done).
//
// With Config.Once a Run ends on its own (once.go): once every message
// of its subjects up to the stream's last sequence at start is acked.
// The range's last message is learnt from the messages' pending counts,
// since the subjects may filter out the stream's last ones.
//
// Credentials and TLS come as nats.Option values (Config.Options; the
// daemon builds them from the pipeline file). Not built yet: headers as
// a column.
package natsjs
