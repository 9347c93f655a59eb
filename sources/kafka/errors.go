package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// RecordError is a record that cannot become a row. Run returns it: the
// record is not skipped, and the source goes no further in its partition.
type RecordError struct {
	Topic     string
	Partition int32
	Offset    int64
	Reason    string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("kafka: topic %q partition %d offset %d: %s", e.Topic, e.Partition, e.Offset, e.Reason)
}

func recordError(r *kgo.Record, format string, args ...any) *RecordError {
	return &RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Reason: fmt.Sprintf(format, args...)}
}

// GapError is a range of a partition's records that the broker removed
// (retention, or a DeleteRecords) before the source ingested them:
// offsets From up to, not including, To are lost. With OnGapStop Run
// returns it; with OnGapSkip it is logged and counted.
type GapError struct {
	Topic     string
	Partition int32
	From, To  int64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("kafka: topic %q partition %d: records at offsets %d..%d (%d records) were removed by the broker (retention) before they were ingested; the log now starts at %d",
		e.Topic, e.Partition, e.From, e.To-1, e.To-e.From, e.To)
}

// AheadError is a partition whose log ends before the offset the host
// recovered: the topic was deleted and created again, or its log was
// truncated. The source cannot tell what it would re-read or miss, so
// it stops.
type AheadError struct {
	Topic     string
	Partition int32
	Resume    int64 // the recovered offset of the next record
	End       int64 // the broker's end of the log
}

func (e *AheadError) Error() string {
	return fmt.Sprintf("kafka: topic %q partition %d: the log ends at offset %d, before the recovered offset %d: was the topic deleted and created again? Give the source a new name to read it from the start",
		e.Topic, e.Partition, e.End, e.Resume)
}

// invariantError is a broken invariant of the source: a bug.
type invariantError struct{ msg string }

func (e *invariantError) Error() string { return "kafka source: invariant broken: " + e.msg }

func invariantf(format string, args ...any) error {
	return &invariantError{fmt.Sprintf(format, args...)}
}
