package iceberg

import (
	"context"
	"errors"
	"fmt"

	icego "github.com/apache/iceberg-go"
)

// The Catalog is the table layer the sink commits through: a few
// operations on one table's metadata, each one request that either takes
// effect or not. Two implement it: the SQL catalog of iceberg-go on
// PostgreSQL or SQLite (package sinks/iceberg/sqlcatalog), and Model
// (model.go), the seeded in-memory catalog the simulator drives. The
// exactly-once protocol (commit.go) is written against this interface
// only, so the simulator runs the production protocol.
//
// Contract, for every method:
//
//   - Blocking: called from a Blocking port's work, never on the loop.
//   - Pinned: Evolve, Append, Expire and Rewrite name the table state they were built on
//     (Table.Schema's ID, Table.Current). If the table has moved since,
//     they fail with an error wrapping ErrConflict and change nothing.
//   - Definite or not: an error wrapping ErrConflict, ErrNoTable or
//     ErrTableExists changed nothing. Any other error may have taken
//     effect (a lost answer, a timeout, a crash of the catalog's server
//     during its commit): the caller must load the table and look before
//     acting again — never retry blindly.
//   - Own retries off: an implementation never retries a commit itself
//     (iceberg-go's commit.retry.num-retries is 0): a retry inside it
//     would be blind.
type Catalog interface {
	// Load reads the table's current metadata, or fails with ErrNoTable.
	Load(ctx context.Context, id Ident) (*Table, error)
	// Create makes the table with schema (field ids as given), the
	// partition spec and properties; ErrTableExists if another writer
	// made it first (the caller loads it then).
	Create(ctx context.Context, id Ident, schema *icego.Schema, spec PartitionSpec, props map[string]string) (*Table, error)
	// Evolve applies ch to the schema of t (pinned to t.Schema's ID).
	Evolve(ctx context.Context, t *Table, ch Change) error
	// Append commits a snapshot adding a.Files on top of t.Current
	// (pinned: 0 means the table must have no snapshot), with a.Summary
	// in the snapshot's summary and a.Props set on the table, atomically.
	Append(ctx context.Context, t *Table, a Append) error
	// Expire removes the snapshots r lets go (pinned to t.Current) and
	// the metadata files only they referenced. Data files are never
	// deleted here: another writer's reader may still be planning on them.
	Expire(ctx context.Context, t *Table, r Retention) error
	// Files lists the data files of t.Current (none for 0), as its
	// manifests record them: path, rows, bytes, day. A read: it changes
	// nothing.
	Files(ctx context.Context, t *Table) ([]DataFile, error)
	// Rewrite commits a snapshot replacing r.Remove — data files of
	// t.Current, by path — with r.Add, holding the same rows, with
	// r.Summary in its summary (pinned to t.Current).
	Rewrite(ctx context.Context, t *Table, r Rewrite) error
}

// Rewrite is one small-file rewrite's commit: the files it replaces, in
// the order their rows are in Add, and the file that holds them.
type Rewrite struct {
	Remove  []DataFile
	Add     DataFile
	Summary map[string]string
}

// Retention is what Expire keeps: the newest KeepLast snapshots of the
// main branch, and every snapshot younger than MaxAgeMs (wall clock, as
// the snapshots' timestamps are) — whichever keeps more.
type Retention struct {
	KeepLast int
	MaxAgeMs int64
	NowMs    int64 // the wall clock of the caller, so models stay seeded
}

// Ident names a table: its Iceberg namespace (one level) and its name.
type Ident struct {
	Namespace string
	Name      string
}

func (id Ident) String() string { return id.Namespace + "." + id.Name }

// Table is one table's metadata as a Load read it.
type Table struct {
	Ident Ident
	// Location is the table's root: file:///… or s3://bucket/…; its data
	// files go under Location + "/data/".
	Location string
	// Schema is the current schema, with its field ids.
	Schema *icego.Schema
	Spec   PartitionSpec
	// Current is the id of the main branch's snapshot; 0: none yet.
	Current int64
	// Snapshots are the retained snapshots, oldest first.
	Snapshots []Snapshot
	// Props are the table's properties.
	Props map[string]string
	// MetadataLocation names the metadata file this state was read from.
	MetadataLocation string
	// Manifests counts the manifest files the current snapshot lists;
	// MetadataLog the earlier metadata files the metadata still lists.
	// Maintenance keeps both bounded (the bounded-metadata oracle reads
	// them).
	Manifests, MetadataLog int
}

// Snapshot is one retained snapshot: its id, its parent's (0: none) and
// its summary.
type Snapshot struct {
	ID, Parent  int64
	TimestampMs int64
	Summary     map[string]string
}

// PartitionSpec is the table's one partition field: a day transform of a
// timestamp column (SourceColumn), named SourceColumn + "_day".
type PartitionSpec struct {
	SourceColumn string
}

// FieldName is the partition field's name.
func (p PartitionSpec) FieldName() string { return p.SourceColumn + "_day" }

// DataFile is one Parquet data file the sink wrote, as an Append adds it.
type DataFile struct {
	// Path is the file's full URI, under the table's Location.
	Path string
	// Rows and Bytes are the file's row count and size in bytes.
	Rows, Bytes int64
	// Day is the partition value: days since 1970-01-01 (UTC) of every
	// row's partition column.
	Day int32
	// Columns holds per-column statistics by field id; nil: none known.
	Columns map[int]ColumnStats
}

// ColumnStats are a column's counts in one data file. Bounds are
// left out on purpose: a reader that cannot prune by them still reads
// right, and an encoding that is wrong would make it skip rows.
type ColumnStats struct {
	Values, Nulls int64
}

// Append is one commit's content.
type Append struct {
	Files   []DataFile
	Summary map[string]string // added to the snapshot's summary
	Props   map[string]string // set on the table in the same commit
}

// Change is a schema evolution: columns to add (optional, ids assigned
// by the catalog) and columns to widen (int→long, float→double).
type Change struct {
	Add   []Column
	Widen []Column
}

// Empty reports whether ch changes nothing.
func (ch Change) Empty() bool { return len(ch.Add) == 0 && len(ch.Widen) == 0 }

// Column is a column by name and its Iceberg type.
type Column struct {
	Name string
	Type icego.Type
}

func (c Column) String() string { return fmt.Sprintf("%s %s", c.Name, c.Type) }

// Errors of a Catalog that changed nothing.
var (
	ErrNoTable     = errors.New("iceberg: no such table")
	ErrTableExists = errors.New("iceberg: table already exists")
	// ErrConflict: the table moved since the state the request was built
	// on (another writer committed); nothing was changed.
	ErrConflict = errors.New("iceberg: commit conflict: the table moved")
)
