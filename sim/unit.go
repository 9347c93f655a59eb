package sim

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
)

// A unit's content: its id, its rows and payloads, each a pure function
// of the id, so that a replayed unit is identical to the first attempt
// and an oracle can rebuild what any unit held.

// unitSchema is every simulated unit's schema: the unit id repeated on
// each row (so an oracle can find units inside segments), the row's index
// in its unit, and a payload derived from both.
var unitSchema = arrow.NewSchema([]arrow.Field{
	{Name: "uid", Type: arrow.PrimitiveTypes.Int64},
	{Name: "row", Type: arrow.PrimitiveTypes.Int32},
	{Name: "payload", Type: arrow.BinaryTypes.String},
}, nil)

var unitFingerprint = segment.FingerprintOf(unitSchema)

// fingerprintOf is a schema's fingerprint, the unit schema's computed
// once (most units have it).
func fingerprintOf(s *arrow.Schema) segment.SchemaFingerprint {
	if s == unitSchema {
		return unitFingerprint
	}
	return segment.FingerprintOf(s)
}

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
	return batchOf(u, 0, payloadWindow(spec, u, rows, false))
}

// window is where a run of rows' payloads lie in the pool: from at, lens
// bytes each, one after the other.
type window struct {
	at   int
	lens []int32
}

// payloadWindow is the pool window of u's rows payloads. With letter,
// it starts at a letter, so that the first payload reads as text
// however a CSV reader infers types (prefix objects, one row a piece).
func payloadWindow(spec SourceSpec, u UID, rows int, letter bool) window {
	lens, total := payloadLens(spec, u, rows)
	if total > len(payloadPool) {
		panic(fmt.Sprintf("sim: unit %s has %d payload bytes, pool %d", u, total, len(payloadPool)))
	}
	span := len(payloadPool) - total + 1
	at := int(mix64(uint64(u)^0x5bd1e995) % uint64(span))
	for letter && payloadPool[at] <= '9' {
		at = (at + 1) % span
	}
	return window{at: at, lens: lens}
}

// payload is row r's payload in the window.
func (win window) payload(r int) string {
	at := win.at
	for _, n := range win.lens[:r] {
		at += int(n)
	}
	return string(payloadPool[at : at+int(win.lens[r])])
}

// batchOf builds a batch of unit schema: uid u on every row, rows
// numbered from first, payloads over the window (zero copy).
func batchOf(u UID, first int, win window) arrow.RecordBatch {
	rows := len(win.lens)
	offsets := make([]byte, 4*(rows+1))
	off := int32(0)
	for r, n := range win.lens {
		binary.LittleEndian.PutUint32(offsets[4*r:], uint32(off))
		off += n
	}
	binary.LittleEndian.PutUint32(offsets[4*rows:], uint32(off))
	payload := array.NewData(arrow.BinaryTypes.String, rows,
		[]*memory.Buffer{nil, memory.NewBufferBytes(offsets), memory.NewBufferBytes(payloadPool[win.at : win.at+int(off)])}, nil, 0, 0)
	defer payload.Release()
	uids, idx := make([]int64, rows), make([]int32, rows)
	for r := range rows {
		uids[r], idx[r] = int64(u), int32(first+r)
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
