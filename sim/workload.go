package sim

import (
	"encoding/binary"
	"fmt"
	"math"
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
// same idempotency key. Each source is one namespace.
type SourceSpec struct {
	Name       string        `json:"name"`
	Sink       string        `json:"sink,omitempty"` // sink_ref; "" is "lake"
	Replayable bool          `json:"replayable,omitempty"`
	CDC        bool          `json:"cdc,omitempty"`
	Partitions int           `json:"partitions,omitempty"` // replayable: offset keys, one unit in flight each
	InFlight   int           `json:"in_flight,omitempty"`  // non-replayable: units in flight at once
	Interval   time.Duration `json:"interval"`             // mean time between units, per partition / per slot
	RowsMin    int           `json:"rows_min"`
	RowsMax    int           `json:"rows_max"`
	// PayloadMin/Max bound one row's payload bytes; 0, 0 means 8..63.
	PayloadMin int `json:"payload_min,omitempty"`
	PayloadMax int `json:"payload_max,omitempty"`
	// Units per partition (or in all, non-replayable); 0: until the fault
	// phase ends.
	Units uint64 `json:"units,omitempty"`
	// StartPermille: the source starts when this many thousandths of the
	// fault phase's steps have run (a bulk load that begins mid-run).
	StartPermille int `json:"start_permille,omitempty"`
	// Timeout: a unit unanswered this long is sent again, the same unit
	// with the same offsets or idempotency key, while the first attempt
	// may still be pending (an HTTP client's timeout, a consumer's
	// re-poll). 0: never.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Backoff bounds the wait before a unit that failed (outcome unknown,
	// engine closed) is sent again: uniform in [Backoff/16, Backoff]. 0
	// means 20–300 ms (the worlds recorded before it was drawn), which is
	// also the wait after a refusal that says "later" (not ready,
	// backpressure), as a client honouring Retry-After waits.
	Backoff time.Duration `json:"backoff,omitempty"`
	// Prefix: objects dropped under a prefix of the store, read by the
	// real objects source (prefix.go); Replayable, without partitions.
	Prefix bool `json:"prefix,omitempty"`
	// Keys (CDC) is the size of the namespace's key space: each change
	// names one of Keys identities, with an order token that units
	// deliver out of order (cdc.go). 0: the rule of the worlds recorded
	// before, one identity per unit out of 97, tokens in unit order.
	Keys int `json:"keys,omitempty"`
	// Encoding (HTTP) is how the source's clients send units: EncodingJSON
	// or EncodingArrow; "" alternates unit by unit, so the namespace gets
	// two schemas (endpoint.go).
	Encoding string `json:"encoding,omitempty"`
}

// The encodings of an HTTP source's requests (SourceSpec.Encoding).
const (
	EncodingJSON  = "json"
	EncodingArrow = "arrow"
)

func (s SourceSpec) sinkRef() string {
	if s.Sink == "" {
		return "lake"
	}
	return s.Sink
}

func (s SourceSpec) payloadBounds() (lo, hi int) {
	if s.PayloadMin == 0 && s.PayloadMax == 0 {
		return 8, 63
	}
	return s.PayloadMin, s.PayloadMax
}

func (s SourceSpec) summary() string {
	kind := "http"
	switch {
	case s.Prefix:
		kind = "prefix"
	case s.Replayable:
		kind = fmt.Sprintf("log/%d", s.Partitions)
	}
	if s.CDC {
		kind += "+cdc"
	}
	if s.Keys > 0 {
		kind += fmt.Sprintf("/%dkeys", s.Keys)
	}
	if s.Encoding != "" {
		kind += "/" + s.Encoding
	}
	lo, hi := s.payloadBounds()
	out := fmt.Sprintf("%s:%s→%s rows=%d..%d payload=%d..%dB every=%v units=%d start=%d‰",
		s.Name, kind, s.sinkRef(), s.RowsMin, s.RowsMax, lo, hi, s.Interval.Round(time.Millisecond), s.Units, s.StartPermille)
	if s.Backoff > 0 {
		out += fmt.Sprintf(" backoff≤%v", s.Backoff.Round(100*time.Microsecond))
	}
	return out
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

// drawSources draws the workload: one to five steady sources (logs,
// CDC, one HTTP endpoint) with small rows, and one or two bulk loads —
// backfills read from many partitions at once, in units sized so that the
// accumulator reaches the segment target — that start somewhere in the
// fault phase and deliver a bounded number of bytes.
func drawSources(r *Rand, s WorldSpec) []SourceSpec {
	n := 1 + r.Intn(5)
	var out []SourceSpec
	for i := range n {
		src := SourceSpec{
			Name: fmt.Sprintf("ns%d", i), Sink: pickSink(r, s),
			Interval: time.Duration(logUniform(r, float64(5*time.Millisecond), float64(time.Second))),
			RowsMin:  1 + r.Intn(8), PayloadMin: 8 + r.Intn(64),
		}
		src.RowsMax = src.RowsMin + r.Intn(56)
		src.PayloadMax = src.PayloadMin + r.Intn(448)
		if r.Chance(0.5) {
			src.Timeout = r.Duration(200*time.Millisecond, 10*time.Second)
		}
		switch {
		case i == 0 || r.Chance(0.25): // an HTTP endpoint
			src.InFlight = 1 + r.Intn(8)
		default:
			src.Replayable, src.Partitions = true, 1+r.Intn(8)
			src.CDC = r.Chance(0.3)
			if src.CDC && r.Chance(0.5) {
				src.Units = uint64(50 + r.Intn(500)) // a snapshot that then stops
			}
		}
		out = append(out, src)
	}
	// Some sources retry at once, as HTTP clients often do: a retry then
	// races the units queued behind a failed log batch (own stream, so
	// the draws above keep their values).
	br := r.Split("backoff")
	for i := range out {
		if br.Chance(0.5) {
			out[i].Backoff = time.Duration(logUniform(br, float64(time.Millisecond), float64(300*time.Millisecond)))
		}
	}
	// Most CDC sources change a small key space out of order (own
	// stream: the draws above keep their values).
	drawKeys(r.Split("cdc-keys"), out)
	// A prefix source in some worlds (own stream: the draws above keep
	// their values).
	if pr := r.Split("prefix"); pr.Chance(0.4) {
		out = append(out, SourceSpec{Name: fmt.Sprintf("obj%d", len(out)), Sink: pickSink(pr, s), Replayable: true, Prefix: true,
			Interval: time.Duration(logUniform(pr, float64(100*time.Millisecond), float64(3*time.Second))),
			RowsMin:  1 + pr.Intn(50), PayloadMin: 8 + pr.Intn(64),
			// The objects source ingests one object at a time, so on the
			// S3 WAL it takes a commit round trip per object: a bounded
			// number of drops keeps the backlog drainable.
			Units: uint64(20 + pr.Intn(300))})
		last := &out[len(out)-1]
		last.RowsMax = last.RowsMin + pr.Intn(200)
		last.PayloadMax = last.PayloadMin + pr.Intn(448)
	}
	out = append(out, drawBulk(r.Split("bulk"), s, len(out)))
	if r.Chance(0.4) {
		out = append(out, drawBulk(r.Split("bulk2"), s, len(out)))
	}
	return out
}

// drawBulk is the bulk load: Partitions × unit bytes ≈ ¾–2½ segment
// targets, so that one round of units (one in flight per partition)
// fills a segment; a unit is at most an eighth of the target.
func drawBulk(r *Rand, s WorldSpec, i int) SourceSpec {
	target := float64(s.Engine.TargetBytes)
	fill := logUniform(r, 0.75, 2.5)
	parts := int(math.Ceil(8*fill)) + r.Intn(24)
	unit := target * fill / float64(parts)
	rows := 8 + r.Intn(121)
	avg := max(int(unit)/rows, 64)
	total := min(target*logUniform(r, 2, 8), bulkMaxSum/2)
	units := max(uint64(total/(float64(parts)*float64(avg*rows))), 1)
	return SourceSpec{
		Name: fmt.Sprintf("bulk%d", i), Sink: pickSink(r, s), Replayable: true, Partitions: parts,
		Interval: time.Duration(logUniform(r, float64(time.Millisecond), float64(50*time.Millisecond))),
		RowsMin:  rows, RowsMax: rows, PayloadMin: avg / 2, PayloadMax: avg + avg/2,
		Units: units, StartPermille: r.Intn(600),
	}
}

func pickSink(r *Rand, s WorldSpec) string {
	if len(s.Sinks) == 0 {
		return "lake"
	}
	return s.Sinks[r.Intn(len(s.Sinks))].Ref
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

// payloadPool is a fixed pseudo-random text that payloads are windows of.
// A unit's payloads are consecutive bytes of one window, so its Arrow
// string column points into the pool instead of copying it (bulk units
// are megabytes). Nothing writes to it.
var payloadPool = func() []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, payloadPoolBytes)
	h := uint64(1)
	for i := range b {
		h = mix64(h + uint64(i))
		b[i] = alphabet[h%uint64(len(alphabet))]
	}
	return b
}()

// payloadPoolBytes bounds one unit's payload bytes: drawBulk keeps units
// at an eighth of a 64 MiB target, and a row at 1.5 times the average.
const payloadPoolBytes = 16 << 20

// payloadLens returns the payload length of each row of u.
func payloadLens(spec SourceSpec, u UID, rows int) ([]int32, int) {
	lo, hi := spec.payloadBounds()
	lens := make([]int32, rows)
	total := 0
	for r := range lens {
		n := lo + int(mix64(uint64(u)*131+uint64(r))%uint64(hi-lo+1))
		lens[r] = int32(n)
		total += n
	}
	return lens, total
}

// unitBatch builds the unit's record batch: uid and row columns, and the
// payload column over a window of the pool (zero copy).
func unitBatch(spec SourceSpec, u UID, rows int) arrow.RecordBatch {
	lens, total := payloadLens(spec, u, rows)
	if total > len(payloadPool) {
		panic(fmt.Sprintf("sim: unit %s has %d payload bytes, pool %d", u, total, len(payloadPool)))
	}
	at := int(mix64(uint64(u)^0x5bd1e995) % uint64(len(payloadPool)-total+1))
	offsets := make([]byte, 4*(rows+1))
	off := int32(0)
	for r, n := range lens {
		binary.LittleEndian.PutUint32(offsets[4*r:], uint32(off))
		off += n
	}
	binary.LittleEndian.PutUint32(offsets[4*rows:], uint32(off))
	payload := array.NewData(arrow.BinaryTypes.String, rows,
		[]*memory.Buffer{nil, memory.NewBufferBytes(offsets), memory.NewBufferBytes(payloadPool[at : at+total])}, nil, 0, 0)
	defer payload.Release()
	uids, idx := make([]int64, rows), make([]int32, rows)
	for r := range rows {
		uids[r], idx[r] = int64(u), int32(r)
	}
	uidData := array.NewData(arrow.PrimitiveTypes.Int64, rows, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(uids))}, nil, 0, 0)
	rowData := array.NewData(arrow.PrimitiveTypes.Int32, rows, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(idx))}, nil, 0, 0)
	defer uidData.Release()
	defer rowData.Release()
	cols := []arrow.Array{array.MakeFromData(uidData), array.MakeFromData(rowData), array.MakeFromData(payload)}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	return array.NewRecordBatch(unitSchema, cols, int64(rows))
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

// idemKey is the engine's idempotency key of unit u of the HTTP source
// serving namespace ns: the HTTP source scopes a client's key (u's
// sequence number) to its namespace as "http/{ns}/{key}", so two sources
// never answer each other's units as duplicates.
func idemKey(ns string, u UID) string { return "http/" + ns + "/" + clientKey(u) }

// clientKey is the Idempotency-Key a simulated client sends for unit u.
func clientKey(u UID) string { return strconv.FormatUint(u.seq(), 10) }

// idemOffsetKey is where the engine's offsets hold that key (the engine
// prefixes keys with "idem/").
func idemOffsetKey(ns string, u UID) string { return "idem/" + idemKey(ns, u) }
