package main

import (
	"context"
	"fmt"
	"os"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sinks"
	"github.com/skipprd/skipprd/sources/generator"
	"github.com/skipprd/skipprd/storage"
)

// openSinks builds the pipeline file's sinks on the host's loop.
func (d *daemon) openSinks(ctx context.Context, pf *pipelineFile, loop *storage.Loop, exec engine.Executor) (sinks.Set, error) {
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
			d.log.Info("sink: Parquet folder", "sink", s.Name, "dir", dir)
		case sinkParquetS3:
			client, err := storage.NewS3ClientFromEnv(ctx, storage.S3ClientOptions{PathStyle: d.cfg.PathStyle})
			if err != nil {
				return nil, fmt.Errorf("sink %q: %w", s.Name, err)
			}
			store := storage.NewS3Store(loop, client, s.Bucket, storage.S3Options{})
			set[s.Name] = sinks.NewParquetObjects(store, exec, s.Prefix)
			d.log.Info("sink: Parquet on S3", "sink", s.Name, "bucket", s.Bucket, "prefix", s.Prefix)
		default:
			return nil, fmt.Errorf("sink %q: kind %q is not built", s.Name, s.Kind)
		}
	}
	return set, nil
}

// openSources builds the pipeline file's sources; an HTTP source binds
// its address now, so a busy port fails the start.
func (d *daemon) openSources(pf *pipelineFile, getenv func(string) string) error {
	gens := 0
	for _, s := range pf.Sources {
		if s.Generator {
			gens++
		}
	}
	for _, s := range pf.Sources {
		var src source
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
			h, err := newHTTPSource(s, getenv, d.log, func() *storage.Host { return d.host })
			if err != nil {
				return err
			}
			src = h
		default:
			return &configError{Var: envPipelineFile, Value: pf.Path,
				Want: fmt.Sprintf("source %q: kind %q is not built yet", s.Name, s.Kind)}
		}
		d.sources = append(d.sources, src)
		d.log.Info("source", src.describe()...)
	}
	return nil
}
