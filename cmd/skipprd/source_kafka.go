package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources/kafka"
	"github.com/skipprd/skipprd/storage"
)

// kafkaSource reads topics of a Kafka cluster.
type kafkaSource struct {
	name string
	spec *kafkaSourceSpec
	src  *kafka.Source
}

// kafkaSource builds a kafka source; its brokers are reached when it
// runs, after recovery (an unreachable cluster is logged and retried).
func (d *daemon) kafkaSource(s sourceSpec, getenv func(string) string) (source, error) {
	k := s.Kafka
	var opts []kgo.Opt
	if k.TLS {
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	if k.SASLMechanism != "" {
		user, pass := getenv(k.SASLUserEnv), getenv(k.SASLPassEnv)
		if user == "" || pass == "" {
			return nil, fmt.Errorf("source %q: sasl_user_env %s and sasl_password_env %s must both be set", s.Name, k.SASLUserEnv, k.SASLPassEnv)
		}
		switch k.SASLMechanism {
		case "plain":
			opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		case "scram-sha-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		case "scram-sha-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
		}
	}
	src, err := kafka.New(kafka.Config{Name: s.Name, Brokers: k.Brokers, Topics: k.Topics, TopicRegex: k.TopicRegex,
		Group: k.Group, Namespace: k.Namespace, SinkRef: s.Sink, Format: k.Format, Start: k.Start, OnGap: k.OnGap,
		ReadCommitted: k.ReadCommitted, Logger: d.log, ClientOpts: opts, Once: d.cfg.Once,
		// In a group, each assignment resumes from the higher of the WAL's
		// offsets view as it is then and the group's committed offsets;
		// the host is set before any source runs.
		Offsets: func(ctx context.Context) (segment.Offsets, error) { return d.host.Offsets(ctx) }})
	if err != nil {
		return nil, fmt.Errorf("source %q: %w", s.Name, err)
	}
	return &kafkaSource{name: s.Name, spec: k, src: src}, nil
}

func (k *kafkaSource) run(ctx context.Context, host *storage.Host, _ segment.Offsets) error {
	// Its units are whatever a fetch returned, not the same when it reads
	// again: it resumes only once the units a disk WAL replayed from its
	// log have committed, or it would read theirs again in other units.
	offsets, err := host.ResumeOffsets(ctx)
	if err != nil {
		return nil // only ctx ends the wait
	}
	return k.src.Run(ctx, host.Ingest, offsets)
}

func (k *kafkaSource) stats() (uint64, uint64) {
	st := k.src.Stats()
	return st.RecordsIngested, st.RecordsAcked
}

func (k *kafkaSource) describe() []any {
	d := []any{"source", k.name, "kind", sourceKafka, "brokers", strings.Join(k.spec.Brokers, ",")}
	if k.spec.TopicRegex != "" {
		d = append(d, "topic_regex", k.spec.TopicRegex)
	} else {
		d = append(d, "topics", strings.Join(k.spec.Topics, ","))
	}
	if k.spec.Group != "" {
		d = append(d, "group", k.spec.Group)
	}
	return d
}
