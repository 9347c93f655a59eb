package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources/mqtt"
	"github.com/skipprd/skipprd/storage"
)

// mqttSource subscribes to MQTT topic filters.
type mqttSource struct {
	name string
	spec *mqttSourceSpec
	src  *mqtt.Source
}

// mqttSource builds an mqtt source; its broker is reached when it runs,
// after recovery.
func (d *daemon) mqttSource(s sourceSpec, getenv func(string) string) (source, error) {
	q := s.MQTT
	cfg := mqtt.Config{Name: s.Name, Broker: q.Broker, Topics: q.Topics, Namespace: q.Namespace, SinkRef: s.Sink,
		Format: q.Format, IDField: q.IDField, Logger: d.log}
	var err error
	if q.UsernameEnv != "" {
		if cfg.Username, err = requireEnv(getenv, q.UsernameEnv); err != nil {
			return nil, fmt.Errorf("source %q: %w", s.Name, err)
		}
	}
	if q.PasswordEnv != "" {
		if cfg.Password, err = requireEnv(getenv, q.PasswordEnv); err != nil {
			return nil, fmt.Errorf("source %q: %w", s.Name, err)
		}
	}
	src, err := mqtt.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("source %q: %w", s.Name, err)
	}
	if q.IDField == "" {
		d.log.Warn("mqtt source: no id_field, so at least once: a message the broker sends again after a crash may be stored twice",
			"source", s.Name)
	}
	return &mqttSource{name: s.Name, spec: q, src: src}, nil
}

// run ignores the offsets: MQTT cannot re-read; the broker's persistent
// session sends again what was not acknowledged.
func (q *mqttSource) run(ctx context.Context, host *storage.Host, _ segment.Offsets) error {
	return q.src.Run(ctx, host.Ingest)
}

func (q *mqttSource) stats() (uint64, uint64) {
	st := q.src.Stats()
	return st.MessagesIngested, st.MessagesAcked
}

func (q *mqttSource) describe() []any {
	return []any{"source", q.name, "kind", sourceMQTT, "broker", q.spec.Broker, "topics", strings.Join(q.spec.Topics, ","),
		"client_id", q.src.ClientID()}
}
