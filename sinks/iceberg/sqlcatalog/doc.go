// Package sqlcatalog is the production iceberg.Catalog of the Iceberg
// sink: iceberg-go's SQL catalog (catalog/sql) on PostgreSQL or SQLite,
// with the tables' files in a local folder or in S3.
//
// # What it owns
//
// A Catalog owns a *sql.DB to the catalog database and the two tables
// iceberg-go keeps there, iceberg_tables and iceberg_namespace_properties,
// which Open creates if they are missing. Every row carries the catalog
// name (Config.Name, "skipprd" by default), so several catalogs can share
// a database. It also owns, under the warehouse, each table's folder
// {Warehouse}/{namespace}/{table}: the sink writes data files under its
// data/, and iceberg-go writes the metadata files, manifest lists and
// manifests under its metadata/. No ".db" suffix is added to the
// namespace folder.
//
// PostgreSQL is opened with pgx's database/sql driver. SQLite is opened
// with modernc.org/sqlite (pure Go, through bun's sqliteshim) in WAL mode
// with synchronous=FULL, so a commit's row is on disk when the commit
// returns, a busy timeout of 30 s, and BEGIN IMMEDIATE for write
// transactions, so concurrent writers (connections of one process or of
// several) queue for the write lock instead of failing.
//
// # What each method does on the server
//
// Every change to a table is one compare-and-swap of its iceberg_tables
// row, keyed by (catalog_name, table_namespace, table_name): iceberg-go
// loads the row and the metadata file it names, checks the commit's
// requirements against that metadata, writes the next metadata file, and
// runs UPDATE iceberg_tables SET metadata_location = next,
// previous_metadata_location = loaded WHERE <key> AND metadata_location =
// loaded. No row updated means another writer swapped first.
//
//   - Load reads the row and the metadata file it names, and the current
//     snapshot's manifest list to count its manifests.
//   - Create inserts the namespace's "exists" row into
//     iceberg_namespace_properties unless the namespace exists (a
//     concurrent creator winning is fine), then writes the table's first
//     metadata file and inserts its row, in a serializable transaction;
//     the row's primary key refuses a second table of the name. It
//     creates through CommitTable with an assert-create requirement,
//     because iceberg-go's CreateTable renumbers the schema's field ids:
//     this way the ids are the ones given. The table gets
//     format version 2, the spec day(SourceColumn) named
//     SourceColumn+"_day" (partition field id 1000), the given properties,
//     and these: commit.retry.num-retries=0 (always), and unless the
//     caller sets them write.metadata.delete-after-commit.enabled=true,
//     write.metadata.previous-versions-max=10,
//     commit.manifest-merge.enabled=true and
//     commit.manifest.min-count-to-merge=16.
//   - Evolve adds the columns (optional) and widens the types in one
//     commit, requiring the current schema id to be t.Schema's.
//   - Append adds one snapshot with the files and the summary, and sets
//     the properties, in one commit requiring main to be at t.Current
//     (with 0: that main does not exist yet). It skips iceberg-go's scan
//     of every manifest for duplicate paths and its automatic name
//     mapping. An Append of no files commits an empty snapshot carrying
//     the summary.
//   - Expire removes, in one commit requiring main to be at t.Current,
//     the snapshots Retention lets go, then deletes their manifest lists
//     and the manifests no retained snapshot lists. It never deletes a
//     data file.
//
// Every commit is built on exactly the metadata t was loaded from: the
// Catalog remembers the metadata of the states Load, Create and its own
// commits returned, keyed by metadata location, and reads a state it
// does not remember again from t.MetadataLocation (metadata files never
// change). It never reloads the table and rebases, which would hide a
// conflict. Every commit also requires the table's UUID to be t's.
//
// # Errors
//
// Every error begins with "sqlcatalog:" and names the table.
//
//   - iceberg.ErrConflict: a requirement failed (the table moved since
//     t), or the compare-and-swap found another metadata location
//     (iceberg-go's table.ErrCommitFailed), or a request failed before its
//     commit on a table that has moved since t (say, t's metadata file was
//     deleted by later commits). Nothing changed.
//   - iceberg.ErrNoTable: Load found no row for the table or namespace,
//     or a request failed before its commit and the table is gone.
//   - iceberg.ErrTableExists: Create found a table of that name, made by
//     another writer (a table with Create's own UUID is its own, whose
//     answer was lost: Create returns it).
//   - Anything else may have taken effect: a database error during the
//     swap, a lost answer, a timeout. The caller must load and look.
//
// iceberg-go's own commit retries are off: Create sets
// commit.retry.num-retries=0, Append refuses properties that would turn
// them on, and each commit goes through a table.CatalogIO that answers a
// retry's refresh, or a second commit attempt, with ErrConflict. So a
// commit is attempted once even on a table another tool configured to
// retry.
//
// # Limits found in iceberg-go v0.7.0
//
//   - CreateTable renumbers field ids (1, 2, … in pre-order), which is
//     why Create commits the table's first metadata itself. Applied to
//     the SQL catalog's blank starting metadata, the table's first schema
//     gets id 1 and its spec id 1; the blank schema 0 is removed.
//   - Failed requirements come back from the SQL catalog as plain errors
//     ("requirement failed: …"). The commit wraps each requirement so
//     that its failure wraps ErrConflict; no error text is matched.
//   - A transaction always asserts main's snapshot. Evolve drops that
//     assertion, so it is pinned to the schema only, as the contract and
//     the Model pin it; Append is pinned to the snapshot only.
//   - Manifest merging (commit.manifest-merge.enabled) does work for
//     AddDataFiles, but only once the new manifest and the current ones
//     number commit.manifest.min-count-to-merge (100 by default): they
//     are then all merged into one. With 16 the current snapshot lists
//     1 to 15 manifests.
//   - ExpireSnapshots' post-commit clean-up deletes the data files no
//     retained snapshot references; it is turned off
//     (WithPostCommit(false)) and this package deletes only manifest
//     lists and manifests. ExpireSnapshots measures ages on its own
//     clock; Expire turns Retention, on the caller's clock, into the
//     number of newest snapshots to keep.
//   - A commit that loses leaves files behind. Append deletes the
//     manifest list and manifests of its own snapshot after a conflict,
//     but when the compare-and-swap is what failed, the metadata file the
//     SQL catalog wrote stays (its name is not returned), as does the
//     first metadata file of a Create that lost a race. They are orphans:
//     nothing references them.
//   - iceberg-go's local file IO does not fsync what it writes, so a
//     catalog row could outlive, in a power loss, the metadata file it
//     names: this package registers its own IO for local files in
//     iceberg-go's registry (durable.go), which fsyncs every file it
//     writes and its folder before the write returns.
//   - An empty Append goes through AddFiles, which also sets the table's
//     schema.name-mapping.default property.
//   - The SQL catalog's commit loads the table itself (row and metadata
//     file) before checking requirements, and the S3 file IO makes a new
//     S3 client every time a file system is loaded: a commit costs a few
//     more requests than the files it writes.
package sqlcatalog
