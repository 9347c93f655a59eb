package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sinks"
	"github.com/skipprd/skipprd/sinks/postgres"
	"github.com/skipprd/skipprd/sources/generator"
	"github.com/skipprd/skipprd/sources/objects"
	"github.com/skipprd/skipprd/sources/postgrescdc"
	"github.com/skipprd/skipprd/storage"
)

// openSinks builds the pipeline file's sinks on the host's loop.
func (d *daemon) openSinks(ctx context.Context, pf *pipelineFile, loop *storage.Loop, exec engine.Executor, getenv func(string) string) (sinks.Set, error) {
	set := sinks.Set{}
	for _, s := range pf.Sinks {
		switch s.Kind {
		case sinkParquetDir:
			dir := s.dir(d.cfg.DataDir)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("sink %q: %w", s.Name, err)
			}
			disk, err := storage.NewOSDisk(loop, dir, storage.DiskOptions{Logger: d.log})
			if err != nil {
				return nil, fmt.Errorf("sink %q: %w", s.Name, err)
			}
			set[s.Name] = sinks.NewParquetDir(disk, exec, storage.NewRand(), "")
			d.log.Info("sink: Parquet folder", append([]any{"sink", s.Name, "dir", dir}, d.laneAttrs(s.Name)...)...)
		case sinkParquetS3:
			client, err := storage.NewS3ClientFromEnv(ctx, storage.S3ClientOptions{PathStyle: d.cfg.PathStyle})
			if err != nil {
				return nil, fmt.Errorf("sink %q: %w", s.Name, err)
			}
			store := storage.NewS3Store(loop, client, s.Bucket, storage.S3Options{})
			set[s.Name] = sinks.NewParquetObjects(store, exec, s.Prefix)
			d.log.Info("sink: Parquet on S3", append([]any{"sink", s.Name, "bucket", s.Bucket, "prefix", s.Prefix}, d.laneAttrs(s.Name)...)...)
		case sinkIceberg:
			sink, err := d.openIceberg(ctx, s, loop, exec, getenv)
			if err != nil {
				return nil, fmt.Errorf("sink %q: %w", s.Name, err)
			}
			set[s.Name] = sink
		case sinkPostgres:
			sink, err := d.openPostgres(ctx, s, loop, getenv)
			if err != nil {
				return nil, fmt.Errorf("sink %q: %w", s.Name, err)
			}
			set[s.Name] = sink
		default:
			return nil, fmt.Errorf("sink %q: kind %q is not built", s.Name, s.Kind)
		}
	}
	return set, nil
}

// openPostgres connects a postgres sink (and says what is wrong when it
// cannot). Its pool and workers match the engine's compaction
// concurrency: one transaction per job in flight, plus one connection for
// the lookups that settle ambiguous commits.
func (d *daemon) openPostgres(ctx context.Context, s sinkSpec, loop *storage.Loop, getenv func(string) string) (engine.Sink, error) {
	url := getenv(s.URLEnv)
	if url == "" {
		return nil, fmt.Errorf("url_env: the environment variable %s is not set; set it to the database's postgres:// URL", s.URLEnv)
	}
	n := d.ecfg.CompactionConcurrency
	db, err := postgres.OpenPGX(ctx, url, postgres.PGXOptions{MaxConns: int32(n + 1), Schema: s.Schema})
	if err != nil {
		return nil, fmt.Errorf("postgres (URL from %s): %w", s.URLEnv, err)
	}
	d.closers = append(d.closers, db.Close)
	d.log.Info("sink: Postgres", append([]any{"sink", s.Name, "url_env", s.URLEnv, "schema", s.Schema, "connections", n + 1},
		d.laneAttrs(s.Name)...)...)
	return postgres.NewSink(db, storage.NewWorkers(loop, n, postgresTxLimit)), nil
}

// postgresTxLimit bounds one job's transaction; past it the job is
// retried (and settled by its id if its commit was in flight).
const postgresTxLimit = 5 * time.Minute

// pgCheckWait bounds a start-up check of a Postgres server.
const pgCheckWait = 15 * time.Second

// openSources builds the pipeline file's sources; an HTTP source binds
// its address now, so a busy port fails the start.
func (d *daemon) openSources(ctx context.Context, pf *pipelineFile, getenv func(string) string) error {
	gens := 0
	for _, s := range pf.Sources {
		if s.Generator {
			gens++
		}
	}
	for _, s := range pf.Sources {
		var (
			src source
			err error
		)
		switch {
		case s.Generator:
			// One generator keeps the offset keys of the daemon without a
			// pipeline file, so such a DATA_DIR resumes where it was.
			prefix := generator.DefaultKeyPrefix
			if gens > 1 {
				prefix += "-" + s.Name
			}
			src = &genSource{name: s.Name, gen: generator.New(generator.Config{SinkRef: s.Sink, KeyPrefix: prefix, Logger: d.log})}
		case s.HTTP != nil:
			src, err = newHTTPSource(s, getenv, d.log, func() *storage.Host { return d.host })
		case s.Files != nil:
			src, err = d.objectSource(s, s.Files.pollSpec, objects.NewDirStore(s.Files.Path), s.Files.Path)
		case s.Objects != nil:
			client, cerr := storage.NewS3ClientFromEnv(ctx, storage.S3ClientOptions{PathStyle: d.cfg.PathStyle})
			if cerr != nil {
				return fmt.Errorf("source %q: %w", s.Name, cerr)
			}
			o := s.Objects
			src, err = d.objectSource(s, o.pollSpec, objects.NewS3Store(client, o.Bucket, o.Prefix), "s3://"+o.Bucket+"/"+o.Prefix)
		case s.PGCDC != nil:
			src, err = d.pgcdcSource(ctx, s, getenv)
		case s.Kafka != nil:
			src, err = d.kafkaSource(s, getenv)
		case s.NATS != nil:
			src, err = d.natsSource(s, getenv)
		case s.MQTT != nil:
			src, err = d.mqttSource(s, getenv)
		default:
			return fmt.Errorf("source %q: kind %q is not built", s.Name, s.Kind)
		}
		if err != nil {
			return err
		}
		d.sources = append(d.sources, src)
		d.log.Info("source", src.describe()...)
	}
	return nil
}

// pgcdcSource builds a postgres-cdc source and checks its server now
// (reachable, wal_level=logical), so a start-up says what is wrong; the
// rest of its set-up (publication, slot, tables) happens when it runs,
// after recovery, and stops the daemon with the reason if it fails.
func (d *daemon) pgcdcSource(ctx context.Context, s sourceSpec, getenv func(string) string) (source, error) {
	p := s.PGCDC
	url := getenv(p.URLEnv)
	if url == "" {
		return nil, fmt.Errorf("source %q: url_env: the environment variable %s is not set; set it to the database's postgres:// URL", s.Name, p.URLEnv)
	}
	src, err := postgrescdc.New(postgrescdc.Config{URL: url, Publication: p.Publication, Slot: p.Slot, Tables: p.Tables,
		SinkRef: s.Sink, HostOffsets: d.host.Offsets, Logger: d.log, Once: d.cfg.Once})
	if err != nil {
		return nil, fmt.Errorf("source %q: %w", s.Name, err)
	}
	cctx, cancel := context.WithTimeout(ctx, pgCheckWait)
	defer cancel()
	if err := src.Check(cctx); err != nil {
		return nil, fmt.Errorf("source %q (URL from %s): %w", s.Name, p.URLEnv, err)
	}
	return &pgcdcSource{name: s.Name, spec: p, src: src}, nil
}

// objectSource builds a files or objects source over store; in once
// mode it ends after ingesting its listing at start.
func (d *daemon) objectSource(s sourceSpec, p pollSpec, store objects.Store, where string) (source, error) {
	o, err := objects.New(objects.Config{Name: s.Name, Namespace: p.Namespace, SinkRef: s.Sink, Format: p.Format,
		Poll: p.Poll, OnError: p.OnError, Order: p.Order, Settle: p.Settle, InFlight: p.InFlight, Logger: d.log, Once: d.cfg.Once}, store)
	if err != nil {
		return nil, fmt.Errorf("source %q: %w", s.Name, err)
	}
	return &objectsSource{name: s.Name, kind: s.Kind, where: where, src: o}, nil
}
