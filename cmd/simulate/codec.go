package main

import (
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
	httpsrc "github.com/skipprd/skipprd/sources/http"
	"github.com/skipprd/skipprd/sources/kafka"
	"github.com/skipprd/skipprd/sources/mqtt"
	"github.com/skipprd/skipprd/sources/natsjs"
)

// brokerCodec is the record logic of the real Kafka or NATS source
// (sources/kafka, sources/natsjs: their OffsetKey, Recovered, Resume and
// Unit, which their Run uses) for a broker source of the world. The
// topic (or stream) is the source's name; nothing connects anywhere.
func brokerCodec(opt sim.CodecOptions) sim.BrokerCodec {
	limits := httpsrc.Limits{Rows: opt.UnitRows}
	quiet := slog.New(slog.DiscardHandler)
	var err error
	switch opt.Kind {
	case sim.CodecKafka:
		onGap := kafka.OnGapStop
		if opt.OnGapSkip {
			onGap = kafka.OnGapSkip
		}
		var src *kafka.Source
		src, err = kafka.New(kafka.Config{Name: opt.Name, Brokers: []string{"sim:9092"}, Topics: []string{opt.Name},
			Namespace: opt.Namespace, SinkRef: opt.Sink, OnGap: onGap, Limits: limits, Logger: quiet})
		if err == nil {
			return kafkaCodec{src, opt.Name}
		}
	case sim.CodecNATS:
		onGap := natsjs.OnGapStop
		if opt.OnGapSkip {
			onGap = natsjs.OnGapSkip
		}
		var src *natsjs.Source
		src, err = natsjs.New(natsjs.Config{Name: opt.Name, URL: "nats://sim:4222", Stream: opt.Name,
			Namespace: opt.Namespace, SinkRef: opt.Sink, OnGap: onGap, Limits: limits, Logger: quiet})
		if err == nil {
			return natsCodec{src, opt.Name + ".events"}
		}
	default:
		err = fmt.Errorf("no codec %q", opt.Kind)
	}
	panic(fmt.Sprintf("simulate: the %s codec of source %s: %v", opt.Kind, opt.Name, err)) // the world drew it
}

// kafkaCodec is the Kafka source's record logic over one topic.
type kafkaCodec struct {
	src   *kafka.Source
	topic string
}

func (c kafkaCodec) OffsetKey(p int) string { return c.src.OffsetKey(c.topic, int32(p)) }
func (c kafkaCodec) First() int64           { return 0 }

func (c kafkaCodec) Recovered(view segment.Offsets, p int) (int64, bool) {
	return c.src.Recovered(view, c.topic, int32(p))
}

func (c kafkaCodec) Resume(p int, at, start, end int64) (sim.Resumed, error) {
	next, gap, err := c.src.Resume(c.topic, int32(p), at, start, end)
	r := sim.Resumed{Next: next}
	if gap != nil {
		r.Gap, r.From, r.To = true, gap.From, gap.To
	}
	return r, err
}

func (c kafkaCodec) Unit(recs []sim.BrokerRecord) (engine.Unit, int, error) {
	krecs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krecs[i] = &kgo.Record{Topic: c.topic, Partition: int32(r.Partition), Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Time}
	}
	return c.src.Unit(c.topic, krecs)
}

// natsCodec is the NATS source's record logic over one stream: a log of
// one partition, its positions the stream's sequences (from 1).
type natsCodec struct {
	src     *natsjs.Source
	subject string
}

func (c natsCodec) OffsetKey(int) string { return c.src.OffsetKey() }
func (c natsCodec) First() int64         { return 1 }

func (c natsCodec) Recovered(view segment.Offsets, _ int) (int64, bool) {
	v, ok := c.src.Recovered(view)
	return int64(v), ok
}

func (c natsCodec) Resume(_ int, at, start, end int64) (sim.Resumed, error) {
	next, gap, err := c.src.Resume(uint64(at), uint64(start), uint64(end-1))
	r := sim.Resumed{Next: int64(next)}
	if gap != nil {
		r.Gap, r.From, r.To = true, int64(gap.From), int64(gap.To)
	}
	return r, err
}

func (c natsCodec) Unit(recs []sim.BrokerRecord) (engine.Unit, int, error) {
	msgs := make([]natsjs.Message, len(recs))
	for i, r := range recs {
		msgs[i] = natsjs.Message{Seq: uint64(r.Offset), Subject: c.subject, At: r.Time.UnixMicro(), Value: r.Value}
	}
	return c.src.Unit(msgs)
}

// mqttCodec is the MQTT source's message logic (sources/mqtt: the Unit
// its Run uses) for an MQTT source of the world: exactly once, by the
// id each message carries in its "uid" field.
func mqttCodec(opt sim.CodecOptions) sim.MessageCodec {
	src, err := mqtt.New(mqtt.Config{Name: opt.Name, Broker: "tcp://sim:1883", Topics: []string{"sim/#"},
		Namespace: opt.Namespace, SinkRef: opt.Sink, IDField: sim.MQTTIDField, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(fmt.Sprintf("simulate: the MQTT logic of source %s: %v", opt.Name, err)) // the world drew it
	}
	return src
}
