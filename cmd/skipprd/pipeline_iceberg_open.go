package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/pgurl"
	"github.com/skipprd/skipprd/sinks"
	"github.com/skipprd/skipprd/sinks/iceberg"
	"github.com/skipprd/skipprd/sinks/iceberg/sqlcatalog"
	"github.com/skipprd/skipprd/storage"
)

// icebergRequestLimit bounds one catalog call (a prepare or a commit,
// with its rebases); past it the job is retried, and its commit settled
// by looking for it.
const icebergRequestLimit = 5 * time.Minute

// openIceberg opens an iceberg sink: its catalog (SQLite in the
// warehouse folder, or the SQL catalog on the server catalog_url_env
// names) and the writer of its data files (the folder, or the bucket
// through the WAL's S3 client stack).
func (d *daemon) openIceberg(ctx context.Context, s sinkSpec, loop *storage.Loop, exec engine.Executor, getenv func(string) string) (engine.Sink, error) {
	spec := s.Iceberg
	files, ccfg, err := d.icebergWarehouse(ctx, spec, loop, exec, getenv)
	if err != nil {
		return nil, err
	}
	shown := ccfg.URI
	if spec.CatalogURLEnv != "" {
		ccfg.URI = getenv(spec.CatalogURLEnv)
		if ccfg.URI == "" {
			return nil, fmt.Errorf("catalog_url_env: the environment variable %s is not set; set it to the catalog database's postgres:// URL", spec.CatalogURLEnv)
		}
		shown = pgurl.Redact(ccfg.URI)
	}
	cat, err := sqlcatalog.Open(ctx, ccfg)
	if err != nil {
		return nil, fmt.Errorf("iceberg catalog %s: %w", shown, err)
	}
	d.closers = append(d.closers, func() {
		d.logIcebergTables(s.Name, spec.Namespace, cat)
		_ = cat.Close()
	})
	n := d.ecfg.CompactionConcurrency
	sink := iceberg.NewSink(iceberg.Config{Catalog: cat, Namespace: spec.Namespace,
		Spec: iceberg.PartitionSpec{SourceColumn: spec.PartitionBy}, SinkRef: s.Name, Files: files,
		Retention: iceberg.Retention{KeepLast: spec.SnapshotsKept}, SmallFiles: smallFiles(spec.SmallFiles),
		Blocking: storage.NewWorkers(loop, n, icebergRequestLimit),
		Exec:     exec, Clock: loop.Clock()})
	d.icebergs = append(d.icebergs, namedIceberg{s.Name, sink})
	d.log.Info("sink: Iceberg tables", append([]any{"sink", s.Name, "warehouse", files.Base(), "catalog", shown,
		"namespace", spec.Namespace, "partition_by", spec.PartitionBy, "snapshots_kept", spec.SnapshotsKept, "small_files", spec.SmallFiles}, d.laneAttrs(s.Name)...)...)
	d.log.Info("Iceberg: how to read the tables",
		"duckdb", "SELECT * FROM iceberg_scan('<the table's current metadata file, logged at stop>')",
		"spark_trino", "an Iceberg JDBC catalog on the same database (catalog name skipprd), or a REST catalog in front of it",
		"tables", strings.TrimSuffix(files.Base(), "/")+"/"+spec.Namespace+"/{namespace}")
	return sink, nil
}

// smallFiles is the rewrite policy of small_files n (0: never).
func smallFiles(n int) iceberg.SmallFiles {
	if n == 0 {
		return iceberg.SmallFiles{Every: -1}
	}
	return iceberg.SmallFiles{MinFiles: n}
}

// icebergStopWait bounds the listing of a sink's tables at stop.
const icebergStopWait = 10 * time.Second

// logIcebergTables logs each table of the sink's namespace with its
// current metadata file — what iceberg_scan and other readers without
// the catalog open — once the host has stopped and the last commit is in.
func (d *daemon) logIcebergTables(sink, namespace string, cat *sqlcatalog.Catalog) {
	ctx, cancel := context.WithTimeout(context.Background(), icebergStopWait)
	defer cancel()
	ids, err := cat.Tables(ctx, namespace)
	if err != nil {
		d.log.Warn("Iceberg: could not list the tables at stop", "sink", sink, "err", err)
		return
	}
	for _, id := range ids {
		t, err := cat.Load(ctx, id)
		if err != nil {
			d.log.Warn("Iceberg: could not read a table at stop", "sink", sink, "table", id.String(), "err", err)
			continue
		}
		d.log.Info("Iceberg table", "sink", sink, "table", id.String(), "snapshot", t.Current, "snapshots", len(t.Snapshots),
			"metadata", t.MetadataLocation, "duckdb", fmt.Sprintf("SELECT count(*) FROM iceberg_scan('%s')", strings.TrimPrefix(t.MetadataLocation, "file://")))
	}
}

// icebergWarehouse opens the writer of a sink's data files and the
// catalog settings that go with it: for a folder, SQLite in it.
func (d *daemon) icebergWarehouse(ctx context.Context, spec *icebergSpec, loop *storage.Loop, exec engine.Executor, getenv func(string) string) (iceberg.Files, sqlcatalog.Config, error) {
	if spec.Bucket != "" {
		opts := storage.S3ClientOptions{PathStyle: d.cfg.PathStyle}
		client, err := storage.NewS3ClientFromEnv(ctx, opts)
		if err != nil {
			return nil, sqlcatalog.Config{}, err
		}
		awsCfg, err := storage.LoadAWSConfig(ctx, opts)
		if err != nil {
			return nil, sqlcatalog.Config{}, err
		}
		store := storage.NewS3Store(loop, client, spec.Bucket, storage.S3Options{})
		files := iceberg.NewObjectFiles(sinks.NewParquetObjects(store, exec, ""), spec.Bucket, spec.Prefix)
		endpoint := cmp.Or(getenv("AWS_ENDPOINT_URL_S3"), aws.ToString(awsCfg.BaseEndpoint))
		return files, sqlcatalog.Config{Warehouse: files.Base(), AWS: &awsCfg, S3PathStyle: d.cfg.PathStyle, S3Endpoint: endpoint}, nil
	}
	dir := spec.folder(d.cfg.DataDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, sqlcatalog.Config{}, err
	}
	disk, err := storage.NewOSDisk(loop, dir, storage.DiskOptions{Logger: d.log})
	if err != nil {
		return nil, sqlcatalog.Config{}, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, sqlcatalog.Config{}, err
	}
	files := iceberg.NewDirFiles(sinks.NewParquetDir(disk, exec, storage.NewRand(), ""), abs)
	return files, sqlcatalog.Config{URI: "sqlite://" + filepath.Join(abs, icebergCatalogFile), Warehouse: files.Base()}, nil
}
