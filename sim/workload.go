package sim

import (
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
)

// SourceSpec describes one simulated source. Replayable sources (a log,
// an object prefix) resume from the offsets the engine recovered and keep
// one unit in flight per partition (offset key); a non-replayable source
// (HTTP) keeps several in flight and retries an unanswered one with the
// same idempotency key.
type SourceSpec struct {
	Name       string
	Replayable bool
	CDC        bool
	Partitions int           // replayable: offset keys, one unit in flight each
	InFlight   int           // non-replayable: units in flight at once
	Interval   time.Duration // mean time between units, per partition / per slot
	RowsMin    int
	RowsMax    int
	Units      uint64 // units per partition (or in all, non-replayable); 0: until the fault phase ends
}

// DefaultWorkload is the mix of the source document: a busy events
// stream, a trickle of pageviews, a small orders snapshot (CDC), and an
// HTTP source that cannot replay.
func DefaultWorkload() []SourceSpec {
	return []SourceSpec{
		{Name: "events", Replayable: true, Partitions: 4, Interval: 25 * time.Millisecond, RowsMin: 4, RowsMax: 32},
		{Name: "pageviews", Replayable: true, Partitions: 1, Interval: 700 * time.Millisecond, RowsMin: 1, RowsMax: 3},
		{Name: "orders", Replayable: true, CDC: true, Partitions: 1, Interval: 40 * time.Millisecond, RowsMin: 1, RowsMax: 8, Units: 400},
		{Name: "http", InFlight: 6, Interval: 20 * time.Millisecond, RowsMin: 1, RowsMax: 6},
	}
}

// unitSchema is every simulated unit's schema: the unit id repeated on
// each row (so an oracle can find units inside segments), the row's index
// in its unit, and a payload derived from both.
var unitSchema = arrow.NewSchema([]arrow.Field{
	{Name: "uid", Type: arrow.PrimitiveTypes.Int64},
	{Name: "row", Type: arrow.PrimitiveTypes.Int32},
	{Name: "payload", Type: arrow.BinaryTypes.String},
}, nil)

var unitFingerprint = segment.FingerprintOf(unitSchema)

// UID identifies a unit: source index, partition, sequence number.
type UID uint64

func makeUID(source, partition int, seq uint64) UID {
	return UID(uint64(source)<<56 | uint64(partition)<<48 | seq)
}

func (u UID) source() int    { return int(u >> 56) }
func (u UID) partition() int { return int(u >> 48 & 0xff) }
func (u UID) seq() uint64    { return uint64(u) & (1<<48 - 1) }

func (u UID) String() string { return fmt.Sprintf("%d/%d/%d", u.source(), u.partition(), u.seq()) }

// unitRows is how many rows a unit has: a pure function of its id, so a
// replayed unit is identical to the first attempt.
func unitRows(spec SourceSpec, u UID) int {
	span := uint64(spec.RowsMax - spec.RowsMin + 1)
	return spec.RowsMin + int(mix64(uint64(u))%span)
}

// builder makes the Arrow batch (and sidecar) of a unit.
type builder struct {
	rb *array.RecordBuilder
}

func newBuilder(mem memory.Allocator) *builder {
	return &builder{rb: array.NewRecordBuilder(mem, unitSchema)}
}

func (b *builder) batch(u UID, rows int) arrow.RecordBatch {
	uids := b.rb.Field(0).(*array.Int64Builder)
	idx := b.rb.Field(1).(*array.Int32Builder)
	payload := b.rb.Field(2).(*array.StringBuilder)
	for r := range rows {
		uids.Append(int64(u))
		idx.Append(int32(r))
		payload.Append(payloadOf(u, r))
	}
	return b.rb.NewRecordBatch()
}

const payloadAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// payloadPool is a fixed pseudo-random text that payloads are windows of.
var payloadPool = func() string {
	b := make([]byte, 4096)
	h := uint64(1)
	for i := range b {
		h = mix64(h + uint64(i))
		b[i] = payloadAlphabet[h%uint64(len(payloadAlphabet))]
	}
	return string(b)
}()

// payloadOf is a row's payload: 8..63 bytes, a pure function of the row.
func payloadOf(u UID, row int) string {
	h := mix64(uint64(u)*131 + uint64(row))
	n := 8 + int(h%56)
	at := int(h>>8) % (len(payloadPool) - n)
	return payloadPool[at : at+n]
}

func sidecarOf(u UID, rows int) *segment.Sidecar {
	s := &segment.Sidecar{Rows: make([]segment.CDCRow, rows)}
	for r := range s.Rows {
		kind := segment.MutationKind(1 + mix64(uint64(u)+uint64(r))%3)
		s.Rows[r] = segment.CDCRow{Kind: kind, Identity: fmt.Appendf(nil, "order:%d", u.seq()%97), Order: uint64(u)<<8 | uint64(r)}
	}
	return s
}

func offsetKey(spec SourceSpec, partition int) string {
	return fmt.Sprintf("src/%s/%d", spec.Name, partition)
}

// idemKeyPrefix starts every idempotency key a simulated source sends.
const idemKeyPrefix = "http/"

func idemKey(u UID) string { return idemKeyPrefix + strconv.FormatUint(u.seq(), 10) }
