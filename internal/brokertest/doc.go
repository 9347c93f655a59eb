// Package brokertest gives tests the message brokers this machine runs
// and a way to run a source until a condition holds (RunUntil):
// NATS with JetStream (SKIPPR_NATS_URL, or nats://127.0.0.1:4222) and
// an MQTT broker (SKIPPR_MQTT_URL, or tcp://127.0.0.1:1883). When none
// answers a test is skipped with a loud message — unless CI=true, where
// it fails: CI must reach them (.ci/run starts them: scripts/nats-setup,
// scripts/mqtt-setup). It also holds the set-ups broker tests in several
// packages share (fixtures.go): a JetStream stream of the test's own
// (NATSStream) and producing to an in-process Kafka cluster
// (KafkaProduce).
package brokertest
