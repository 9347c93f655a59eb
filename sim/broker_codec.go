package sim

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/zeebo/xxh3"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// A broker source whose SourceSpec.Codec names a real source ("kafka",
// "nats") runs that source's record logic (Config.Codec, supplied by
// cmd/simulate from sources/kafka and sources/natsjs): its offset keys
// and values, where a partition resumes against its log — a gap named
// and stopped on or skipped as its on_gap says, a log behind the offset
// refused — and how records become a unit (JSON decoded as the source
// decodes it, its metadata columns, a unit halved while its records do
// not fit the limits together). The world keeps its own log
// (broker_log.go) and its own cut of fetches into runs of records; the
// client (franz-go, nats.go) is not run.
//
// A record of a codec world is one row, {"uid","row","payload"} as JSON
// lines carry it, so the oracles read the decoded rows as any other
// (UnitColumns), and check the metadata columns against the record each
// row came from (checkMeta). Record seq (1, 2, …) of partition p is at
// position seq-1+First in the source's log.

// Codec kinds: the real sources whose record logic a broker world runs.
const (
	CodecKafka = "kafka"
	CodecNATS  = "nats"
)

// BrokerRecord is a record of a codec world's log.
type BrokerRecord struct {
	Partition int
	Offset    int64 // its position in the partition's log
	Key       []byte
	Value     []byte
	Time      time.Time
}

// Resumed is where a codec's source goes on in a partition: Next; Gap
// says records From up to, not including, To were reported lost.
type Resumed struct {
	Next     int64
	Gap      bool
	From, To int64
}

// BrokerCodec is a real broker source's record logic for one source of
// the world.
type BrokerCodec interface {
	// OffsetKey is partition p's offset key; its value is the position
	// of the partition's next record.
	OffsetKey(p int) string
	// First is the position of a partition's first record.
	First() int64
	// Recovered is where view says partition p resumes (ok false: it
	// holds no offset of p).
	Recovered(view segment.Offsets, p int) (next int64, ok bool)
	// Resume is where the source goes on in partition p when it expects
	// the record at position at and the log holds start up to, not
	// including, end; err: it stops (a gap with on_gap stop, or a log
	// that ends before at).
	Resume(p int, at, start, end int64) (Resumed, error)
	// Unit is the unit of recs (one partition's, in order) and how many
	// of them it holds, the first ones.
	Unit(recs []BrokerRecord) (engine.Unit, int, error)
}

// CodecOptions configure the codec of one source.
type CodecOptions struct {
	Kind      string // CodecKafka or CodecNATS
	Name      string // the source's name
	Namespace string
	Sink      string
	OnGapSkip bool
	// UnitRows bounds the rows of one unit (the decoder's Limits.Rows);
	// 0: the source's default. Small ones make units halve.
	UnitRows int
}

// CodecFactory builds the codec of one source.
type CodecFactory func(opt CodecOptions) BrokerCodec

// World marks of codec worlds.
const (
	MarkCodecSplit     = "codec-unit-halved" // a unit held fewer records than the fetch brought (the limits)
	MarkCodecKafkaUnit = "codec-kafka-unit"  // a unit cut by the Kafka source's record logic
	MarkCodecNATSUnit  = "codec-nats-unit"   // a unit cut by the NATS source's message logic
	MarkCodecGap       = "codec-gap"         // a gap the source's Resume named
)

// newCodec builds the source's codec, or nil for a world without one.
func (s *source) newCodec() BrokerCodec {
	if s.spec.Codec == "" || s.w.cfg.Codec == nil || !s.broker() {
		return nil
	}
	onGapSkip := s.spec.Broker != nil && s.spec.Broker.OnGapSkip
	return s.w.cfg.Codec(CodecOptions{Kind: s.spec.Codec, Name: s.spec.Name, Namespace: s.spec.Name, Sink: s.spec.sinkRef(),
		OnGapSkip: onGapSkip, UnitRows: s.spec.UnitRows})
}

// first is the position of a partition's first record: the offset
// value that covers record seq is seq + first.
func (s *source) first() int64 {
	if s.codec == nil {
		return 0
	}
	return s.codec.First()
}

// keyOf is partition p's offset key.
func (s *source) keyOf(p int) string {
	if s.codec == nil {
		return offsetKey(s.spec, p)
	}
	return s.codec.OffsetKey(p)
}

// pos is record seq's position in its partition's log.
func (s *source) pos(seq uint64) int64 { return int64(seq) - 1 + s.first() }

// seqAt is the record at position at.
func (s *source) seqAt(at int64) uint64 { return uint64(at - s.first() + 1) }

// recoveredNext is the record partition p resumes at by the engine's
// recovered offsets, and whether they hold one.
func (s *source) recoveredNext(p int) (uint64, bool) {
	if s.codec == nil {
		v, ok := s.w.eng.Offset(offsetKey(s.spec, p))
		return v + 1, ok
	}
	at, ok := s.codec.Recovered(s.w.eng.Offsets(), p)
	if !ok {
		return 1, false
	}
	return s.seqAt(at), true
}

// codecResume asks the codec where partition p goes on from s.next[p],
// its log holding records start..end, and reports a gap to the world
// (reportGap). It reports whether the partition goes on. What the
// source's answer must be is the world's to say: the same record, or
// past a gap it names — stopping exactly when on_gap says stop; never
// a stop on a log that holds the record, never a silent move.
func (s *source) codecResume(p int, start, end uint64, resume bool) bool {
	at := s.next[p]
	r, err := s.codec.Resume(p, s.pos(at), s.pos(start), s.pos(end+1))
	skip := s.spec.Broker != nil && s.spec.Broker.OnGapSkip
	switch {
	case !r.Gap && err != nil:
		s.w.oracle.fail("source %s partition %d: the source stops at record %d of a log holding %d..%d: %v", s.spec.Name, p, at, start, end, err)
	case !r.Gap && r.Next < s.pos(start):
		s.w.oracle.fail("source %s partition %d: the source goes on at record %d, which retention removed (log %d..%d), without reporting a gap",
			s.spec.Name, p, s.seqAt(r.Next), start, end)
	case !r.Gap && r.Next != s.pos(at):
		s.w.oracle.fail("source %s partition %d: the source moves from record %d to %d without reporting a gap (log %d..%d)",
			s.spec.Name, p, at, s.seqAt(r.Next), start, end)
	case !r.Gap:
		return true
	case s.brk == nil:
		s.w.oracle.fail("source %s partition %d: the source reports records %d..%d lost from a log nothing is removed from", s.spec.Name, p, s.seqAt(r.From), s.seqAt(r.To)-1)
	case (err == nil) != skip:
		s.w.oracle.fail("source %s partition %d: on_gap skip is %v, but the source answered a gap with err=%v", s.spec.Name, p, skip, err)
	default:
		s.w.mark(MarkCodecGap)
		g := brokerGap{p: p, from: s.seqAt(r.From), to: s.seqAt(r.To), skipped: err == nil, resume: resume, at: s.w.sched.Now()}
		if !s.reportGap(g) {
			return false
		}
		s.next[p] = s.seqAt(r.Next)
		return true
	}
	if s.brk != nil {
		s.brk.stopped = true // the world cannot say what such a source reads next
	}
	return false
}

// codecUnit is partition p's records first..last as the codec cuts them
// into a unit: the unit, and the last record it holds.
func (s *source) codecUnit(p int, first, last uint64) (engine.Unit, uint64, bool) {
	recs := make([]BrokerRecord, 0, last-first+1)
	for seq := first; seq <= last; seq++ {
		recs = append(recs, s.record(p, seq))
	}
	u, n, err := s.codec.Unit(recs)
	if err != nil || n < 1 || n > len(recs) {
		s.w.oracle.fail("source %s partition %d: records %d..%d make no unit (%d of them): %v", s.spec.Name, p, first, last, n, err)
		return engine.Unit{}, 0, false
	}
	if s.spec.Codec == CodecNATS {
		s.w.mark(MarkCodecNATSUnit)
	} else {
		s.w.mark(MarkCodecKafkaUnit)
	}
	if n < len(recs) {
		s.w.mark(MarkCodecSplit)
		last = first + uint64(n) - 1
	}
	want := segment.Offsets{{Key: s.keyOf(p), Value: uint64(s.pos(last) + 1)}}
	if !slices.Equal(u.Offsets, want) {
		s.w.oracle.fail("source %s partition %d: the unit of records %d..%d has offsets %v, want %v", s.spec.Name, p, first, last, u.Offsets, want)
	}
	return u, last, true
}

// record is partition p's record seq: its unit's one row as a JSON line,
// its key the uid's decimal on two records of three. The oracle learns
// the row, with the metadata the source adds, as it is made.
func (s *source) record(p int, seq uint64) BrokerRecord {
	uid := makeUID(s.idx, p, seq)
	value, d := s.oneRow(uid)
	r := BrokerRecord{Partition: p, Offset: s.pos(seq), Value: value,
		Time: recordEpoch.Add(time.Duration(seq) * time.Millisecond)} // a record's own: the same at every fetch
	if seq%3 != 0 {
		r.Key = strconv.AppendInt(nil, int64(uid), 10)
	}
	s.w.oracle.producedDigest(uid, s.codecDigest(d, r))
	return r
}

// oneRow is unit uid's one row as a JSON line without its newline, and
// its digest: the row unitContent makes of it (a broker or MQTT source's
// unit is one plain row), without building the batch.
func (s *source) oneRow(uid UID) ([]byte, RowDigest) {
	if unitRows(s.spec, uid) != 1 || !shapeOf(s.spec, uid).plain() {
		panic(fmt.Sprintf("sim: source %s: unit %s is not one plain row", s.spec.Name, uid))
	}
	payload := payloadWindow(s.spec, uid, 1, false).payload(0)
	var buf bytes.Buffer
	writeRecord(&buf, objJSONL, uid, 0, payload)
	var d RowDigest
	d.AddRow(int64(uid), 0, payload)
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), d
}

// recordMeta are the metadata columns a codec's source adds to each
// row, found by name (UnitColumns): where the record was in its log,
// checked against the uid the row holds (record seq of partition p is
// its uid's), and its key; the others (time, headers, subject) are
// taken as they are.
type recordMeta struct {
	partitions *array.Int32  // _kafka_partition
	offsets    *array.Int64  // _kafka_offset: seq-1
	sequences  *array.Int64  // _nats_sequence: seq
	keys       *array.Binary // _kafka_key: null, or the uid's decimal
}

// set takes column name if it is a metadata column, and reports whether
// it is one of the right type.
func (m *recordMeta) set(name string, col arrow.Array) bool {
	ok := true
	switch name {
	case "_kafka_partition":
		m.partitions, ok = col.(*array.Int32)
	case "_kafka_offset":
		m.offsets, ok = col.(*array.Int64)
	case "_nats_sequence":
		m.sequences, ok = col.(*array.Int64)
	case "_kafka_key":
		m.keys, ok = col.(*array.Binary)
	case "_kafka_timestamp", "_kafka_headers", "_nats_subject", "_nats_timestamp", "_mqtt_topic":
	default:
		return false
	}
	return ok
}

// check compares each row's metadata, where it has some (a table two
// sources share holds rows without), with its uid's record.
func (m recordMeta) check(uids *array.Int64) error {
	if uids == nil {
		return nil
	}
	for i := range uids.Len() {
		uid := UID(uids.Value(i))
		seq := int64(uid.seq())
		switch {
		case m.partitions != nil && m.partitions.IsValid(i) && int(m.partitions.Value(i)) != uid.partition():
			return fmt.Errorf("row %d of record %s: _kafka_partition %d", i, uid, m.partitions.Value(i))
		case m.offsets != nil && m.offsets.IsValid(i) && m.offsets.Value(i) != seq-1:
			return fmt.Errorf("row %d of record %s: _kafka_offset %d, want %d", i, uid, m.offsets.Value(i), seq-1)
		case m.sequences != nil && m.sequences.IsValid(i) && m.sequences.Value(i) != seq:
			return fmt.Errorf("row %d of record %s: _nats_sequence %d, want %d", i, uid, m.sequences.Value(i), seq)
		case m.keys != nil && m.keys.IsValid(i) && string(m.keys.Value(i)) != strconv.FormatInt(int64(uid), 10):
			return fmt.Errorf("row %d of record %s: _kafka_key %q", i, uid, m.keys.Value(i))
		}
	}
	return nil
}

// addTo adds row i's metadata that is not null to d: a record's row
// digests with its metadata (codecDigest), so that a row that lost it,
// or gained some, is not the row produced.
func (m recordMeta) addTo(d *RowDigest, i int) {
	if m.partitions != nil && m.partitions.IsValid(i) {
		d.addMeta(digestPartition, uint64(m.partitions.Value(i)))
	}
	if m.offsets != nil && m.offsets.IsValid(i) {
		d.addMeta(digestOffset, uint64(m.offsets.Value(i)))
	}
	if m.sequences != nil && m.sequences.IsValid(i) {
		d.addMeta(digestSequence, uint64(m.sequences.Value(i)))
	}
	if m.keys != nil && m.keys.IsValid(i) {
		d.addMeta(digestKey, xxh3.Hash(m.keys.Value(i)))
	}
}

func (d *RowDigest) addMeta(tag, v uint64) {
	d.word(tag)
	d.word(v)
}

// recordEpoch is when the world's records begin to be produced.
var recordEpoch = time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)

// codecDigest is the digest of record r's row, d, with the metadata the
// codec's source adds.
func (s *source) codecDigest(d RowDigest, r BrokerRecord) RowDigest {
	if s.spec.Codec == CodecNATS {
		d.addMeta(digestSequence, uint64(r.Offset))
		return d
	}
	d.addMeta(digestPartition, uint64(r.Partition))
	d.addMeta(digestOffset, uint64(r.Offset))
	if r.Key != nil {
		d.addMeta(digestKey, xxh3.Hash(r.Key))
	}
	return d
}

// Share of broker sources that run a real source's record logic, and of
// those that can (no partition added) that run the NATS source's, on one
// partition.
const (
	codecShare     = 0.6
	codecNATSShare = 0.4
	codecRowsShare = 0.3
)

// drawCodecs draws, for each broker source of every pipeline, whether
// it runs a real source's record logic and whose: a record is one row
// then, and in some worlds a unit holds few rows, so that units halve.
func drawCodecs(r *Rand, s *WorldSpec) {
	draw := func(src *SourceSpec) {
		if src.FetchMax == 0 || !src.Replayable || src.CDC || src.Prefix || !r.Chance(codecShare) {
			return
		}
		src.Codec = CodecKafka
		added := src.Broker != nil && len(src.Broker.AddedPermille) > 0
		if !added && r.Chance(codecNATSShare) {
			src.Codec, src.Partitions = CodecNATS, 1 // a stream: one sequence
		}
		src.RowsMin, src.RowsMax = 1, 1
		if r.Chance(codecRowsShare) {
			src.UnitRows = 1 + r.Intn(src.FetchMax)
		}
	}
	for i := range s.Sources {
		draw(&s.Sources[i])
		if i > 0 { // the first stays an HTTP endpoint
			drawMQTT(r, &s.Sources[i])
		}
	}
	for p := range s.Pipelines {
		for i := range s.Pipelines[p].Sources {
			draw(&s.Pipelines[p].Sources[i])
		}
	}
}

// mqttShare of the sources that cannot replay are MQTT publishers.
const mqttShare = 0.3

// drawMQTT makes src, in some worlds, an MQTT publisher (mqtt_codec.go)
// instead of HTTP clients: a message is one row, none of the clients'
// encodings, evolving fields or invalid requests.
func drawMQTT(r *Rand, src *SourceSpec) {
	if src.Replayable || src.Prefix || !r.Chance(mqttShare) {
		return
	}
	src.Codec, src.RowsMin, src.RowsMax = CodecMQTT, 1, 1
	src.Encoding, src.ExtraField, src.WidenField, src.RefusePermille, src.BodyCap = "", false, false, 0, 0
}
