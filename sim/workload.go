package sim

import (
	"fmt"
	"math"
	"strconv"
	"time"
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
	InFlight   int           `json:"in_flight,omitempty"`  // non-replayable: units in flight at once; prefix: objects
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
	// FetchMax (replayable, not CDC): a broker source (broker.go), whose
	// units are runs of 1..FetchMax records cut anew at every fetch. 0:
	// one record a unit, the same after every restart.
	FetchMax int `json:"fetch_max,omitempty"`
	// Broker (broker source): what its broker does besides serving
	// records — retention, partitions added, outages (broker_spec.go).
	// nil: none of them.
	Broker *BrokerSpec `json:"broker,omitempty"`
	// Codec (broker source): the real source whose record logic cuts
	// its units and decides its resumes (CodecKafka, CodecNATS;
	// broker_codec.go); UnitRows bounds a unit's rows there (0: the
	// source's default). "": the world's model of the Kafka source.
	Codec    string `json:"codec,omitempty"`
	UnitRows int    `json:"unit_rows,omitempty"`
	// Prefix: objects dropped under a prefix of the store, read by the
	// real objects source (prefix.go); Replayable, without partitions.
	Prefix bool `json:"prefix,omitempty"`
	// Formats (prefix): FormatsMixed drops JSON lines, CSV and Parquet
	// objects (of one or several row groups), chosen per object; ""
	// drops Parquet objects of one row group, one unit each (the worlds
	// recorded before). See prefix_objects.go.
	Formats string `json:"formats,omitempty"`
	// ChunkBytes (prefix) bounds the text or row groups of one unit of
	// the objects source; 0: its default (8 MiB, above any object).
	ChunkBytes int64 `json:"chunk_bytes,omitempty"`
	// OrderKeys (prefix): the source keeps a floor under which every
	// object is done (order "keys"), rising over objects listed at least
	// Settle ago. (InFlight, for a prefix source: objects it ingests at
	// once; 0: one, the worlds recorded before.)
	OrderKeys bool          `json:"order_keys,omitempty"`
	Settle    time.Duration `json:"settle,omitempty"`
	// Once (prefix): the source runs as skipprd run --once does, again
	// and again (prefix_once.go): each run lists once, ingests what that
	// listing shows, and ends; the world starts the next OnceEvery after
	// one ended (a cron). false: one run polls until a crash.
	Once      bool          `json:"once,omitempty"`
	OnceEvery time.Duration `json:"once_every,omitempty"`
	// CorruptPermille (prefix): this many thousandths of the objects
	// cannot be ingested, and the source skips such objects (on_error
	// "skip"). 0: none, and the source stops on one (on_error "stop").
	CorruptPermille int `json:"corrupt_permille,omitempty"`
	// Keys (CDC) is the size of the namespace's key space: each change
	// names one of Keys identities, with an order token that units
	// deliver out of order (cdc.go). 0: the rule of the worlds recorded
	// before, one identity per unit out of 97, tokens in unit order.
	Keys int `json:"keys,omitempty"`
	// Encoding (HTTP) is how the source's clients send units: EncodingJSON,
	// EncodingCSV or EncodingArrow; EncodingMixed3 rotates the three unit
	// by unit; "" alternates Arrow and JSON lines unit by unit (the worlds
	// recorded before CSV), so the namespace gets two schemas (endpoint.go).
	Encoding string `json:"encoding,omitempty"`
	// ExtraField, WidenField (HTTP): some units sent as JSON lines or CSV
	// carry an extra field, or a field whose type widens from int64 to
	// float64 (shape.go). false: the unit schema only, as before.
	ExtraField bool `json:"extra_field,omitempty"`
	WidenField bool `json:"widen_field,omitempty"`
	// RefusePermille (HTTP): this many thousandths of the units are sent
	// first as an invalid request, which the source must refuse, then as
	// the valid one under the same key (refuse.go). 0: none.
	RefusePermille int `json:"refuse_permille,omitempty"`
	// BodyCap (HTTP) is the endpoint's body cap, bytes, above every valid
	// body the source's clients build; 0: the HTTP source's default.
	BodyCap int64 `json:"body_cap,omitempty"`
}

// The encodings of an HTTP source's requests (SourceSpec.Encoding).
const (
	EncodingJSON   = "json"
	EncodingArrow  = "arrow"
	EncodingCSV    = "csv"
	EncodingMixed3 = "mixed3"
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
	if s.Codec == CodecMQTT {
		kind = CodecMQTT
	}
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
	if s.Formats != "" {
		kind += "/" + s.Formats + "/chunk=" + strconv.FormatInt(s.ChunkBytes, 10)
	}
	if s.Codec != "" && s.Codec != CodecMQTT {
		kind += "/" + s.Codec
		if s.UnitRows > 0 {
			kind += fmt.Sprintf("/unit_rows=%d", s.UnitRows)
		}
	}
	if s.CorruptPermille > 0 {
		kind += fmt.Sprintf("/corrupt=%d‰", s.CorruptPermille)
	}
	if s.Once {
		kind += "/once-every=" + s.OnceEvery.Round(time.Millisecond).String()
	}
	if s.ExtraField {
		kind += "+extra"
	}
	if s.WidenField {
		kind += "+widen"
	}
	if s.RefusePermille > 0 {
		kind += fmt.Sprintf("/refuse=%d‰", s.RefusePermille)
	}
	if s.BodyCap > 0 {
		kind += "/cap=" + strconv.FormatInt(s.BodyCap, 10)
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
	// Some log sources read like the Kafka source, a fetch at a time
	// (own stream, as below).
	fr := r.Split("fetch")
	for i := range out {
		if out[i].Replayable && !out[i].CDC && fr.Chance(0.4) {
			out[i].FetchMax = 2 + fr.Intn(15)
		}
	}
	br := r.Split("backoff")
	for i := range out {
		if br.Chance(0.5) {
			out[i].Backoff = time.Duration(logUniform(br, float64(time.Millisecond), float64(300*time.Millisecond)))
		}
	}
	// Most CDC sources change a small key space out of order (own
	// stream: the draws above keep their values).
	drawKeys(r.Split("cdc-keys"), out)
	// Most HTTP clients rotate Arrow, JSON lines and CSV, evolve their
	// schemas and now and then send an invalid request first (own
	// stream).
	drawHTTP(r.Split("http"), s, out)
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
		drawObjects(r.Split("prefix-objects"), last)
		drawPrefixScale(r.Split("prefix-scale"), last)
		drawPrefixOnce(r.Split("prefix-once"), last)
	}
	out = append(out, drawBulk(r.Split("bulk"), s, len(out)))
	if r.Chance(0.4) {
		out = append(out, drawBulk(r.Split("bulk2"), s, len(out)))
	}
	return out
}

// drawHTTP draws how each HTTP source's clients send: most rotate Arrow,
// JSON lines and CSV; many evolve their schemas — an extra field, a
// field widening to float64, except into a Postgres or Iceberg sink,
// which refuse to widen bigint (long) to double precision by design (the
// sinks store values losslessly or not at all; Iceberg allows only
// int→long and float→double); some send an invalid request first now and
// then; and some endpoints cap bodies a little above the largest their
// clients send, so that an oversized body meets the cap.
func drawHTTP(r *Rand, s WorldSpec, out []SourceSpec) {
	for i := range out {
		src := &out[i]
		if src.Replayable {
			continue
		}
		if r.Chance(0.7) {
			src.Encoding = EncodingMixed3
		}
		src.ExtraField = r.Chance(0.6)
		kind := sinkKindOf(s, src.sinkRef())
		src.WidenField = r.Chance(0.6) && kind != "postgres" && kind != "iceberg"
		if r.Chance(0.5) {
			src.RefusePermille = 20 + r.Intn(200)
		}
		if r.Chance(0.6) {
			bound := bodyBound(*src)
			src.BodyCap = bound + int64(r.Uint64()%uint64(bound))
		}
	}
}

// bodyBound bounds the bytes of any valid request body a source's
// clients build: rows of JSON lines with every optional field, or of an
// Arrow stream, plus the stream's schema and framing.
func bodyBound(spec SourceSpec) int64 {
	_, hi := spec.payloadBounds()
	return int64(spec.RowsMax)*int64(hi+128) + 4096
}

func sinkKindOf(s WorldSpec, ref string) string {
	for _, k := range s.Sinks {
		if k.Ref == ref {
			return k.Kind
		}
	}
	return ""
}

// drawObjects draws what a prefix source's producer drops: in most
// worlds objects of every format under a chunk bound that cuts many of
// them into several units (a typical object is a sixth to about one
// chunk, so the larger ones are several), never below two of its
// longest records (a record longer than a chunk is an error of the
// object); in half of those some objects it cannot ingest. A chunk
// takes a commit round trip, so such worlds drop fewer objects.
func drawObjects(r *Rand, spec *SourceSpec) {
	if !r.Chance(0.85) {
		return
	}
	spec.Formats = FormatsMixed
	lo, hi := spec.payloadBounds()
	line := float64((lo+hi)/2 + 48)
	typical := line * float64(spec.RowsMin+spec.RowsMax) / 2
	spec.ChunkBytes = max(int64(logUniform(r, typical/6, typical*1.2)), 2*int64(hi+96))
	spec.Units = 10 + spec.Units/2
	if r.Chance(0.5) {
		spec.CorruptPermille = 20 + r.Intn(150)
	}
}

// drawPrefixScale draws how a prefix source keeps up: objects in flight
// at once, a floor (order "keys") and, in some worlds, thousands of
// small objects dropped fast, as a bucket of log files fills.
func drawPrefixScale(r *Rand, spec *SourceSpec) {
	if r.Chance(0.6) {
		spec.InFlight = 2 + r.Intn(7)
	}
	if r.Chance(0.5) {
		spec.OrderKeys = true
		spec.Settle = time.Duration(logUniform(r, float64(50*time.Millisecond), float64(20*time.Second)))
	}
	if spec.InFlight >= 4 && r.Chance(0.4) {
		spec.Units = uint64(1000 + r.Intn(4000))
		spec.Interval = time.Duration(logUniform(r, float64(2*time.Millisecond), float64(30*time.Millisecond)))
		spec.RowsMin, spec.RowsMax = 1, 1+r.Intn(8)
	}
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
