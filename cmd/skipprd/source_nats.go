package main

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources/natsjs"
	"github.com/skipprd/skipprd/storage"
)

// natsSource reads a NATS JetStream stream.
type natsSource struct {
	name string
	spec *natsSourceSpec
	src  *natsjs.Source
}

// natsSource builds a nats source; its server is reached when it runs,
// after recovery (an unreachable server is logged and retried).
func (d *daemon) natsSource(s sourceSpec, getenv func(string) string) (source, error) {
	n := s.NATS
	opts, err := natsCredentials(n, getenv)
	if err != nil {
		return nil, fmt.Errorf("source %q: %w", s.Name, err)
	}
	src, err := natsjs.New(natsjs.Config{Name: s.Name, URL: n.URL, Stream: n.Stream, Subjects: n.Subjects,
		Namespace: n.Namespace, SinkRef: s.Sink, Format: n.Format, Start: n.Start, OnGap: n.OnGap, Logger: d.log,
		Options: opts, Once: d.cfg.Once})
	if err != nil {
		return nil, fmt.Errorf("source %q: %w", s.Name, err)
	}
	return &natsSource{name: s.Name, spec: n, src: src}, nil
}

// natsCredentials are the connection options of n's credentials; a
// variable it names that is not set, or empty, or a creds file that
// cannot be read, is an error naming it: the daemon does not start.
func natsCredentials(n *natsSourceSpec, getenv func(string) string) ([]nats.Option, error) {
	need := func(name string) (string, error) { return requireEnv(getenv, name) }
	switch {
	case n.CredsFile != "":
		if _, err := os.ReadFile(n.CredsFile); err != nil {
			return nil, fmt.Errorf("creds_file: %w", err)
		}
		return []nats.Option{nats.UserCredentials(n.CredsFile)}, nil
	case n.UsernameEnv != "":
		user, err := need(n.UsernameEnv)
		if err != nil {
			return nil, err
		}
		pass, err := need(n.PasswordEnv)
		if err != nil {
			return nil, err
		}
		return []nats.Option{nats.UserInfo(user, pass)}, nil
	case n.TokenEnv != "":
		token, err := need(n.TokenEnv)
		if err != nil {
			return nil, err
		}
		return []nats.Option{nats.Token(token)}, nil
	}
	return nil, nil
}

func (n *natsSource) run(ctx context.Context, host *storage.Host, _ segment.Offsets) error {
	// Its units are whatever a fetch returned, not the same when it reads
	// again: it resumes only once the units a disk WAL replayed from its
	// log have committed, or it would read theirs again in other units.
	offsets, err := host.ResumeOffsets(ctx)
	if err != nil {
		return nil // only ctx ends the wait
	}
	return n.src.Run(ctx, host.Ingest, offsets)
}

func (n *natsSource) stats() (uint64, uint64) {
	st := n.src.Stats()
	return st.MessagesIngested, st.MessagesAcked
}

func (n *natsSource) describe() []any {
	return []any{"source", n.name, "kind", sourceNATS, "url", n.spec.URL, "stream", n.spec.Stream}
}

// requireEnv is the value of the environment variable name, which the
// pipeline file names: not set, or empty, is an error naming it.
func requireEnv(getenv func(string) string, name string) (string, error) {
	v := getenv(name)
	if v == "" {
		return "", fmt.Errorf("environment variable %s, named in the pipeline file, is not set", name)
	}
	return v, nil
}
