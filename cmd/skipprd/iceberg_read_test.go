package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx" driver, for the catalog's own table

	"github.com/skipprd/skipprd/internal/nodetest"
)

// Reading an Iceberg lake back the way another engine would: the
// catalog's own table for each table's metadata file (SQL, not
// iceberg-go), then internal/nodetest's iceberg.mjs — the metadata JSON,
// the Avro manifest list and manifests (avsc), the listed data files
// (DuckDB). No part of iceberg-go reads what the tests compare.

// icebergCatalogQuery lists a catalog's tables of one namespace with
// their current metadata file (iceberg-go's SQL catalog schema).
const icebergCatalogQuery = `SELECT table_name, metadata_location FROM iceberg_tables
	WHERE catalog_name = 'skipprd' AND table_namespace = 'skipprd'`

// icebergMetadataSQLite reads the tables of a SQLite catalog file.
func icebergMetadataSQLite(t *testing.T, path string) map[string]string {
	t.Helper()
	return icebergMetadata(t, "sqlite", "file:"+path+"?mode=ro")
}

// icebergMetadataPG reads the tables of the SQL catalog in a Postgres
// database.
func icebergMetadataPG(t *testing.T, url string) map[string]string {
	t.Helper()
	return icebergMetadata(t, "pgx", url)
}

// icebergMetadata reads a catalog database's tables through
// database/sql's driver (modernc's sqlite, pgx's stdlib).
func icebergMetadata(t *testing.T, driver, dsn string) map[string]string {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("open the catalog (%s): %v", driver, err)
	}
	defer db.Close()
	rows, err := db.Query(icebergCatalogQuery)
	if err != nil {
		t.Fatalf("read the catalog (%s): %v", driver, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, loc string
		if err := rows.Scan(&name, &loc); err != nil {
			t.Fatal(err)
		}
		out[name] = loc
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// icebergTables reads every table of metadata (table → metadata file)
// with the independent reader and checks what the sink promises of each:
// no compaction id in two retained snapshots, every listed file's rows
// counted by its manifest entry. from and to map file locations to this
// machine ("" for none).
func icebergTables(t *testing.T, metadata map[string]string, from, to string) map[string]nodetest.IcebergRead {
	t.Helper()
	out := map[string]nodetest.IcebergRead{}
	for name, loc := range metadata {
		r := nodetest.Iceberg(t, loc, "#1", from, to) // the id column: all the tests compare
		if err := checkIcebergRead(r); err != nil {
			t.Errorf("table %s (%s): %v", name, loc, err)
		}
		out[name] = r
	}
	return out
}

// checkIcebergRead: each compaction id in at most one snapshot, and the
// rows read equal to the records the manifests list.
func checkIcebergRead(r nodetest.IcebergRead) error {
	seen := map[string]string{}
	for _, s := range r.Snapshots {
		id := s.Summary["skipprd.compaction-id"]
		if id == "" {
			continue
		}
		if prev, dup := seen[id]; dup {
			return fmt.Errorf("compaction id %s is in snapshots %s and %s", id, prev, s.ID)
		}
		seen[id] = s.ID
	}
	var listed int
	for _, f := range r.Files {
		var n int
		if _, err := fmt.Sscan(f.Records, &n); err != nil {
			return fmt.Errorf("file %s: record count %q", f.Path, f.Records)
		}
		listed += n
	}
	if listed != len(r.Rows) {
		return fmt.Errorf("the manifests list %d records in %d files, the files hold %d rows", listed, len(r.Files), len(r.Rows))
	}
	return nil
}

// icebergIDs is each table's first column as text, sorted: the ids the
// lake tests compare with what was acked.
func icebergIDs(t *testing.T, tables map[string]nodetest.IcebergRead) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for name, r := range tables {
		ids := make([]string, 0, len(r.Rows))
		for _, row := range r.Rows {
			ids = append(ids, strings.Trim(fmt.Sprint(row[0]), `"`))
		}
		slices.Sort(ids)
		out[name] = ids
	}
	return out
}

// fileExists reports whether path names something (a stat that fails
// for another reason than absence fails the caller's read later).
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// icebergLake reads the Iceberg warehouse folder lake (its SQLite
// catalog), or returns nil when lake is not one (a Parquet folder).
func icebergLake(t *testing.T, lake string) map[string]nodetest.IcebergRead {
	t.Helper()
	catalog := filepath.Join(lake, icebergCatalogFile)
	if !fileExists(catalog) {
		return nil
	}
	return icebergTables(t, icebergMetadataSQLite(t, catalog), "", "")
}

// checkIcebergLake is checkLake for the default Iceberg lake: files for
// events and orders, and each of their ids once.
func checkIcebergLake(t *testing.T, tables map[string]nodetest.IcebergRead) map[string]int {
	t.Helper()
	files := map[string]int{}
	for name, r := range tables {
		files[name] = len(r.Files)
	}
	for ns, ids := range icebergIDs(t, tables) {
		if ns != "orders" && ns != "events" {
			continue
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] == ids[i-1] {
				t.Fatalf("%s id %s is in the lake twice", ns, ids[i])
			}
		}
	}
	if files["events"] == 0 || files["orders"] == 0 {
		t.Fatalf("lake files per namespace: %v; want data files for events and orders", files)
	}
	return files
}
