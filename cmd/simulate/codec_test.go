package main

import (
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
)

// codecJob is a small world, under crashes, whose "events" source is a
// broker source run by the real kind source's record logic: records
// fetched four at a time into units of at most unitRows rows, from a
// broker whose retention removes records a crashed or refused consumer
// has not read yet, and that goes away twice.
func codecJob(t *testing.T, kind string, skip bool, unitRows int) job {
	t.Helper()
	j, err := drawJob(7, 60_000, "crash")
	if err != nil {
		t.Fatal(err)
	}
	spec := sim.SmallSpec("parquet-dir")
	spec.Engine.LiveSegmentsMax = 1 << 20
	src := &spec.Sources[0]
	src.Sink, src.FetchMax, src.Partitions, src.RowsMin, src.RowsMax = "lake", 4, 3, 1, 1
	if kind == sim.CodecNATS {
		src.Partitions = 1
	}
	src.Codec, src.UnitRows = kind, unitRows
	src.Broker = &sim.BrokerSpec{RetentionAge: 250 * time.Millisecond, RetentionCheck: 50 * time.Millisecond, OnGapSkip: skip,
		Outages: []sim.BrokerOutage{{StartPermille: 200, Length: 2 * time.Second}, {StartPermille: 600, Length: 500 * time.Millisecond}}}
	for i := range spec.Sources {
		spec.Sources[i].Sink = "lake"
	}
	j.spec = spec
	return j
}

func runCodecJob(j job, codec sim.CodecFactory) sim.Result {
	cfg, _ := j.config()
	cfg.Codec = codec
	return sim.NewWorld(cfg).Run(time.Now)
}

// Worlds whose broker source runs the real Kafka and NATS sources'
// record logic pass — gaps named and stopped on or skipped, units
// halved to the limits, every row's metadata checked in the lake.
func TestCodecWorlds(t *testing.T) {
	for _, c := range []struct {
		kind string
		skip bool
		mark string
	}{
		{sim.CodecKafka, false, sim.MarkBrokerGapStopped},
		{sim.CodecKafka, true, sim.MarkBrokerGapSkipped},
		{sim.CodecNATS, false, sim.MarkBrokerGapStopped},
		{sim.CodecNATS, true, sim.MarkBrokerGapSkipped},
	} {
		res := runCodecJob(codecJob(t, c.kind, c.skip, 3), brokerCodec)
		if res.Err() != nil {
			t.Fatalf("%s skip=%v: %v", c.kind, c.skip, res.Err())
		}
		unit := sim.MarkCodecKafkaUnit
		if c.kind == sim.CodecNATS {
			unit = sim.MarkCodecNATSUnit
		}
		for _, m := range []string{unit, sim.MarkCodecSplit, sim.MarkCodecGap, c.mark} {
			if res.WorldMarks[m] == 0 {
				t.Errorf("%s skip=%v: mark %s not reached: %v", c.kind, c.skip, m, res.WorldMarks)
			}
		}
	}
}

// brokenCodec is a codec with one slip of a real source's logic.
type brokenCodec struct {
	sim.BrokerCodec
	silentSkip bool // a gap skipped without a word, whatever on_gap says
	offsetPlus uint64
}

func (b brokenCodec) Resume(p int, at, start, end int64) (sim.Resumed, error) {
	if b.silentSkip && at < start {
		return sim.Resumed{Next: start}, nil
	}
	return b.BrokerCodec.Resume(p, at, start, end)
}

func (b brokenCodec) Unit(recs []sim.BrokerRecord) (engine.Unit, int, error) {
	u, n, err := b.BrokerCodec.Unit(recs)
	if b.offsetPlus > 0 && err == nil {
		u.Offsets = segment.Offsets{{Key: u.Offsets[0].Key, Value: u.Offsets[0].Value + b.offsetPlus}}
	}
	return u, n, err
}

// The world catches a source that skips a gap silently, and one whose
// units claim a record they do not hold.
func TestCodecWorldsCatchBrokenLogic(t *testing.T) {
	for _, c := range []struct {
		name   string
		broken brokenCodec
		want   string
	}{
		{"silent-skip", brokenCodec{silentSkip: true}, "without reporting a gap"},
		{"offset-past-last", brokenCodec{offsetPlus: 1}, "has offsets"},
	} {
		res := runCodecJob(codecJob(t, sim.CodecKafka, false, 0), func(opt sim.CodecOptions) sim.BrokerCodec {
			b := c.broken
			b.BrokerCodec = brokerCodec(opt)
			return b
		})
		if res.Err() == nil || !strings.Contains(strings.Join(res.Violations, "\n"), c.want) {
			t.Errorf("%s: violations %q, want one saying %q", c.name, res.Violations, c.want)
		}
	}
}

// A world whose publisher is read by the real MQTT source's message
// logic passes — messages unacked at crashes delivered again and stored
// once, by their ids — and one whose logic keys units by anything but
// the message's id is caught.
func TestMQTTWorld(t *testing.T) {
	j := codecJob(t, sim.CodecKafka, true, 0)
	for i := range j.spec.Sources {
		if s := &j.spec.Sources[i]; !s.Replayable {
			s.Codec, s.RowsMin, s.RowsMax = sim.CodecMQTT, 1, 1
		}
	}
	res := runCodecJob(j, brokerCodec)
	if res.Err() != nil {
		t.Fatal(res.Err())
	}
	for _, m := range []string{sim.MarkMQTTUnit, sim.MarkMQTTRedelivered} {
		if res.WorldMarks[m] == 0 {
			t.Errorf("mark %s not reached: %v", m, res.WorldMarks)
		}
	}
	cfg, _ := j.config()
	cfg.MQTT = func(opt sim.CodecOptions) sim.MessageCodec { return topicKeyed{mqttCodec(opt)} }
	res = sim.NewWorld(cfg).Run(time.Now)
	if want := "keyed"; res.Err() == nil || !strings.Contains(strings.Join(res.Violations, "\n"), want) {
		t.Errorf("a unit keyed by its topic: violations %q, want one saying %q", res.Violations, want)
	}
}

// topicKeyed keys every message of a topic alike.
type topicKeyed struct{ sim.MessageCodec }

func (k topicKeyed) Unit(topic string, payload []byte) (engine.Unit, error) {
	u, err := k.MessageCodec.Unit(topic, payload)
	u.IdempotencyKey = "mqtt/" + topic
	return u, err
}
