package main

import (
	"strings"
	"testing"
	"time"
)

// SKIPPR_ONCE parses as a boolean; in once mode the stop grace defaults
// to onceStopGrace unless SKIPPR_STOP_GRACE_SECONDS sets it; a value
// that is not a boolean names the variable.
func TestParseConfigOnce(t *testing.T) {
	for _, c := range []struct {
		env   map[string]string
		once  bool
		grace time.Duration
	}{
		{nil, false, 10 * time.Second},
		{map[string]string{envOnce: "true"}, true, onceStopGrace},
		{map[string]string{envOnce: "1", envStopGrace: "25"}, true, 25 * time.Second},
		{map[string]string{envOnce: "false"}, false, 10 * time.Second},
	} {
		cfg, err := parseConfig(envOf(c.env))
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if cfg.Once != c.once || cfg.StopGrace != c.grace || cfg.engineConfig().StopGrace != c.grace {
			t.Errorf("%v: once %v, stop grace %v; want %v, %v", c.env, cfg.Once, cfg.StopGrace, c.once, c.grace)
		}
	}
	_, err := parseConfig(envOf(map[string]string{envOnce: "yes please", envStopGrace: "0"}))
	for _, want := range []string{`SKIPPR_ONCE="yes please": want true`, `SKIPPR_STOP_GRACE_SECONDS="0"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("invalid once and grace: %v; want every problem, %q among them", err, want)
		}
	}
}

// Every source kind with no end to reach is refused in once mode, by
// name, line and reason (kafka only with a group); files, objects,
// postgres-cdc, nats and kafka without a group are not.
func TestOnceRefusals(t *testing.T) {
	pf := &pipelineFile{Path: "p.yaml", Sources: []sourceSpec{
		{Name: "in", Kind: sourceFiles, Line: 3, Files: &filesSourceSpec{}},
		{Name: "s3", Kind: sourceObjects, Line: 4, Objects: &objectsSourceSpec{}},
		{Name: "db", Kind: sourcePGCDC, Line: 5, PGCDC: &pgcdcSourceSpec{}},
		{Name: "api", Kind: sourceHTTP, Line: 6, HTTP: &httpSourceSpec{}},
		{Name: "iot", Kind: sourceMQTT, Line: 7, MQTT: &mqttSourceSpec{}},
		{Name: "gen", Kind: sourceGenerator, Line: 8, Generator: true},
		{Name: "topic", Kind: sourceKafka, Line: 9, Kafka: &kafkaSourceSpec{Group: "g"}},
		{Name: "js", Kind: sourceNATS, Line: 10, NATS: &natsSourceSpec{}},
		{Name: "direct", Kind: sourceKafka, Line: 11, Kafka: &kafkaSourceSpec{}},
	}}
	got := problems(onceRefusals(pf))
	want := []string{
		`p.yaml:6: source "api" (kind http) cannot run with SKIPPR_ONCE=true (run --once): an HTTP endpoint holds nothing at start`,
		`p.yaml:7: source "iot" (kind mqtt) cannot run`,
		`p.yaml:8: source "gen" (kind generator) cannot run`,
		`p.yaml:9: source "topic" (kind kafka) cannot run with SKIPPR_ONCE=true (run --once): with group "g" a consumer group`,
	}
	if len(got) != len(want) {
		t.Fatalf("refusals %q; want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("refusal %d: %q; want it to start %q", i, got[i], w)
		}
	}
	if err := onceRefusals(&pipelineFile{Sources: append(pf.Sources[:3:3], pf.Sources[7:]...)}); err != nil {
		t.Errorf("files, objects, postgres-cdc, nats and kafka without a group refused: %v", err)
	}
}
