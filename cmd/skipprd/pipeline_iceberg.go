package main

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/skipprd/skipprd/sinks/iceberg"
)

// An iceberg sink in the pipeline file:
//
//	lake:
//	  kind: iceberg
//	  warehouse: lake               a folder (relative to DATA_DIR unless
//	                                absolute) or s3://bucket/prefix
//	  catalog_url_env: CATALOG_URL  the environment variable holding a
//	                                postgres:// URL: the SQL catalog on
//	                                that server. Absent: SQLite, in the
//	                                warehouse folder (catalog.db)
//	  namespace: skipprd            the Iceberg namespace of the tables
//	  partition_by: _ingested_at    a timestamp column, by day
//	  snapshots_kept: 100           time travel over the last N commits
//	  small_files: 8                rewrite a day's files under 32 MiB
//	                                into one once this many are there,
//	                                looked at every 2×N commits (0: never)
//
// A warehouse on S3 needs a catalog on a server: the SQLite catalog is a
// file on this host, and a table whose pointer dies with the host is
// lost to every reader (and to a new host recovering the WAL).
var icebergKeys = []string{"warehouse", "catalog_url_env", "namespace", "partition_by", "snapshots_kept", "small_files"}

// icebergSpec is an iceberg sink's own settings.
type icebergSpec struct {
	// Warehouse as written: a folder (relative to DATA_DIR unless
	// absolute) or s3://bucket/prefix.
	Warehouse     string
	Bucket        string // an S3 warehouse's bucket, else ""
	Prefix        string // an S3 warehouse's prefix
	CatalogURLEnv string // "": SQLite in the warehouse folder
	Namespace     string
	PartitionBy   string
	SnapshotsKept int
	SmallFiles    int // 0: never rewritten
}

// Defaults and bounds of an iceberg sink's settings.
const (
	icebergWarehouseDefault = "lake"
	icebergNamespaceDefault = "skipprd"
	snapshotsKeptMax        = 10000
	smallFilesMax           = 10000
	icebergCatalogFile      = "catalog.db"
)

// icebergName: an Iceberg namespace or column the sink names, as SQL
// engines take it unquoted.
var icebergName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// icebergSink reads an iceberg sink's keys.
func (c *checker) icebergSink(m *mapping) *icebergSpec {
	s := &icebergSpec{Warehouse: icebergWarehouseDefault, Namespace: icebergNamespaceDefault,
		PartitionBy: iceberg.PartitionDefault, SnapshotsKept: iceberg.RetentionDefault.KeepLast,
		SmallFiles: iceberg.SmallFilesDefault.MinFiles}
	if v, line, ok := c.text(m, "warehouse", false, "a folder relative to DATA_DIR, e.g. lake, or s3://bucket/prefix"); ok {
		s.Warehouse = v
		c.warehouse(m, s, line)
	}
	if _, _, ok := c.str(m, "catalog_url_env"); ok {
		s.CatalogURLEnv = c.envRef(m, "catalog_url_env", false, "SKIPPR_CATALOG_URL")
	}
	if s.Bucket != "" && s.CatalogURLEnv == "" {
		c.errorf(m.line, m.where, "warehouse %q is on S3, so the catalog must outlive this host: set catalog_url_env to the name of a variable holding a postgres:// URL (the default SQLite catalog is a file on this host)", s.Warehouse)
	}
	s.Namespace = c.icebergName(m, "namespace", s.Namespace)
	s.PartitionBy = c.icebergName(m, "partition_by", s.PartitionBy)
	if v, line, ok := c.text(m, "snapshots_kept", false, "a number of snapshots, e.g. 100"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > snapshotsKeptMax {
			c.errorf(line, m.where, "snapshots_kept %q: want a whole number from 1 to %d", v, snapshotsKeptMax)
		} else {
			s.SnapshotsKept = n
		}
	}
	if v, line, ok := c.text(m, "small_files", false, "a number of files, e.g. 8, or 0 for never"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n == 1 || n < 0 || n > smallFilesMax {
			c.errorf(line, m.where, "small_files %q: want 0 (never rewrite) or a whole number from 2 to %d", v, smallFilesMax)
		} else {
			s.SmallFiles = n
		}
	}
	return s
}

// warehouse checks the warehouse value s.Warehouse read at line.
func (c *checker) warehouse(m *mapping, s *icebergSpec, line int) {
	if rest, ok := strings.CutPrefix(s.Warehouse, "s3://"); ok {
		s.Bucket, s.Prefix, _ = strings.Cut(rest, "/")
		s.Prefix = strings.Trim(s.Prefix, "/")
		if !bucketName.MatchString(s.Bucket) {
			c.errorf(line, m.where, "warehouse %q: bucket %q is not an S3 bucket name (3..63 of a-z, 0-9, . and -, starting and ending with a letter or digit)", s.Warehouse, s.Bucket)
		}
		return
	}
	if strings.Contains(s.Warehouse, "://") {
		c.errorf(line, m.where, "warehouse %q: want a folder or s3://bucket/prefix", s.Warehouse)
		return
	}
	if filepath.IsAbs(s.Warehouse) {
		return
	}
	first, _, _ := strings.Cut(filepath.ToSlash(filepath.Clean(s.Warehouse)), "/")
	switch {
	case first == "." || first == "..":
		c.errorf(line, m.where, "warehouse %q is DATA_DIR itself or outside it; want a folder under it, e.g. lake", s.Warehouse)
	case slices.Contains(reservedData, first):
		c.errorf(line, m.where, "warehouse %q is inside DATA_DIR's %s, which the daemon owns (reserved: %s); want e.g. lake",
			s.Warehouse, first, strings.Join(reservedData, ", "))
	}
}

// icebergName reads an optional name key, def when absent.
func (c *checker) icebergName(m *mapping, key, def string) string {
	v, line, ok := c.text(m, key, false, "a name, e.g. "+def)
	if !ok {
		return def
	}
	if !icebergName.MatchString(v) {
		c.errorf(line, m.where, "%s %q: want a letter or _, then up to 127 of letters, digits and _, e.g. %s", key, v, def)
		return def
	}
	return v
}

// folder is a folder warehouse's path: under dataDir unless absolute.
func (s *icebergSpec) folder(dataDir string) string {
	if filepath.IsAbs(s.Warehouse) {
		return filepath.Clean(s.Warehouse)
	}
	return filepath.Join(dataDir, s.Warehouse)
}
