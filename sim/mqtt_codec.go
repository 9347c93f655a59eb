package sim

import (
	"strconv"

	"github.com/skipprd/skipprd/engine"
)

// A source whose SourceSpec.Codec is CodecMQTT is an MQTT publisher at
// QoS 1 into a persistent session, read by the real MQTT source's
// message logic (Config.MQTT, supplied by cmd/simulate from
// sources/mqtt; the client, paho, is not run): each message is one
// JSON line whose "uid" field is its id (id_field), and the source's
// Unit makes its unit, keyed "mqtt/{name}/{id}". The broker's side is
// the world's slot source (source.go): a message whose PUBACK — the
// host's ACK — never came is delivered again, after a crash too, with
// the same id; the host must store it once. A message the host acked is
// not delivered again: the world does not model a PUBACK lost on the
// wire, whose redelivery the same key answers.

// CodecMQTT is the kind of a source read by the MQTT source's logic.
const CodecMQTT = "mqtt"

// MessageCodec is the real MQTT source's message logic for one source.
type MessageCodec interface {
	// Unit is the unit of the message payload received on topic.
	Unit(topic string, payload []byte) (engine.Unit, error)
}

// MessageCodecFactory builds the message logic of one source
// (CodecOptions.Kind is CodecMQTT; the id field is MQTTIDField).
type MessageCodecFactory func(opt CodecOptions) MessageCodec

// World marks of MQTT sources.
const (
	MarkMQTTUnit        = "mqtt-unit"        // a unit made by the MQTT source's message logic
	MarkMQTTRedelivered = "mqtt-redelivered" // a message delivered again with its id: unacked at a crash, or refused
)

// MQTTIDField is the field of a world's MQTT message that holds its id
// (the source's id_field).
const MQTTIDField = "uid"

// newMQTT builds the source's message logic, or nil.
func (s *source) newMQTT() MessageCodec {
	if s.spec.Codec != CodecMQTT || s.w.cfg.MQTT == nil || s.spec.Replayable {
		return nil
	}
	return s.w.cfg.MQTT(CodecOptions{Kind: CodecMQTT, Name: s.spec.Name, Namespace: s.spec.Name, Sink: s.spec.sinkRef()})
}

// idemKeyOf is the engine's idempotency key of the source's unit uid.
func (s *source) idemKeyOf(uid UID) string {
	if s.mqtt != nil {
		return "mqtt/" + s.spec.Name + "/" + strconv.FormatInt(int64(uid), 10)
	}
	return idemKey(s.spec.Name, uid)
}

// mqttTopic is the topic the source's messages are published on.
func (s *source) mqttTopic() string { return "sim/" + s.spec.Name }

// mqttUnit is message uid's unit as the MQTT source makes it; the
// oracle learns its row as it is made.
func (s *source) mqttUnit(uid UID) (engine.Unit, bool) {
	value, d := s.oneRow(uid)
	s.w.oracle.producedDigest(uid, d)
	u, err := s.mqtt.Unit(s.mqttTopic(), value)
	if err != nil {
		s.w.oracle.fail("source %s: message %s makes no unit: %v", s.spec.Name, uid, err)
		return engine.Unit{}, false
	}
	if want := s.idemKeyOf(uid); u.IdempotencyKey != want {
		s.w.oracle.fail("source %s: message %s's unit is keyed %q, want %q", s.spec.Name, uid, u.IdempotencyKey, want)
	}
	s.w.mark(MarkMQTTUnit)
	return u, true
}
