package sqlcatalog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	icego "github.com/apache/iceberg-go"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	icegoio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/skipprd/skipprd/sinks/iceberg"
)

// Evolve adds ch.Add as optional columns and widens ch.Widen, in one
// commit pinned to t's schema id (not to t.Current: a snapshot another
// writer added meanwhile does not change the schema).
func (c *Catalog) Evolve(ctx context.Context, t *iceberg.Table, ch iceberg.Change) error {
	if ch.Empty() {
		return nil
	}
	ctx = c.withAWS(ctx)
	txn, _, err := c.transaction(ctx, t, pins{schema: true})
	if err != nil {
		return c.unstaged(ctx, "evolve", t, err)
	}
	us := txn.UpdateSchema(true, false)
	for _, col := range ch.Add {
		us.AddColumn([]string{col.Name}, col.Type, "", false, nil)
	}
	for _, col := range ch.Widen {
		us.UpdateColumn([]string{col.Name}, table.ColumnUpdate{FieldType: icego.Optional[icego.Type]{Val: col.Type, Valid: true}})
	}
	if err := us.Commit(); err != nil {
		return c.unstaged(ctx, "evolve", t, err)
	}
	return c.commit(ctx, "evolve", t, txn)
}

// Append commits one snapshot adding a.Files with a.Summary, and sets
// a.Props, pinned to t.Current (not to the schema: a column another
// writer added meanwhile is null in these files, as Iceberg reads them).
func (c *Catalog) Append(ctx context.Context, t *iceberg.Table, a iceberg.Append) error {
	return c.commitSnapshot(ctx, "append to", t, func(ctx context.Context, txn *table.Transaction, spec icego.PartitionSpec) error {
		return stageAppend(ctx, txn, spec, a)
	})
}

// commitSnapshot commits the snapshot stage stages on a transaction
// pinned to t.Current (op names it in errors; stage gets the context
// with the catalog's AWS configuration), and after a conflict deletes
// the files it wrote for it.
func (c *Catalog) commitSnapshot(ctx context.Context, op string, t *iceberg.Table,
	stage func(context.Context, *table.Transaction, icego.PartitionSpec) error) error {
	ctx = c.withAWS(ctx)
	txn, base, err := c.transaction(ctx, t, pins{current: true})
	if err != nil {
		return c.unstaged(ctx, op, t, err)
	}
	if err := stage(ctx, txn, base.PartitionSpec()); err != nil {
		return c.unstaged(ctx, op, t, err)
	}
	err = c.commit(ctx, op, t, txn)
	if errors.Is(err, iceberg.ErrConflict) {
		c.dropStagedSnapshot(ctx, t, txn)
	}
	return err
}

// Rewrite commits one snapshot replacing r.Remove with r.Add (a
// "replace" snapshot, iceberg-go's RewriteFiles), with r.Summary, pinned
// to t.Current. The files to remove are matched by path against the
// manifests of t.Current; one the table does not hold fails the request
// before anything is written.
func (c *Catalog) Rewrite(ctx context.Context, t *iceberg.Table, r iceberg.Rewrite) error {
	return c.commitSnapshot(ctx, "rewrite", t, func(ctx context.Context, txn *table.Transaction, spec icego.PartitionSpec) error {
		return stageRewrite(ctx, txn, spec, r)
	})
}

// stageRewrite stages r's snapshot on txn, whose table has partition
// spec spec.
func stageRewrite(ctx context.Context, txn *table.Transaction, spec icego.PartitionSpec, r iceberg.Rewrite) error {
	if len(r.Remove) == 0 {
		return errors.New("a rewrite that removes no file")
	}
	rw := txn.NewRewrite(icego.Properties(r.Summary))
	for _, f := range r.Remove {
		df, err := dataFile(spec, f)
		if err != nil {
			return err
		}
		rw.DeleteFile(df)
	}
	add, err := dataFile(spec, r.Add)
	if err != nil {
		return err
	}
	rw.AddDataFile(add)
	return rw.Commit(ctx)
}

// dropStagedSnapshot deletes, after a conflict (nothing committed), the
// manifest list and the manifests txn wrote for its snapshot; the files
// of the table's snapshots are left alone. It is best effort: what it
// misses is an orphan, never a loss.
func (c *Catalog) dropStagedSnapshot(ctx context.Context, t *iceberg.Table, txn *table.Transaction) {
	staged, err := txn.StagedTable()
	if err != nil {
		return
	}
	snap := staged.Metadata().SnapshotByName(table.MainBranch)
	if snap == nil || snap.SnapshotID == t.Current {
		return
	}
	fsys, err := c.fsFunc(t.MetadataLocation)(ctx)
	if err != nil {
		return
	}
	if mans, err := snap.Manifests(fsys); err == nil {
		for _, m := range mans {
			if m.SnapshotID() == snap.SnapshotID {
				_ = removeIfPresent(fsys, m.FilePath())
			}
		}
	}
	_ = removeIfPresent(fsys, snap.ManifestList)
}

// stageAppend stages a's properties and its snapshot on txn, whose table
// has partition spec spec.
func stageAppend(ctx context.Context, txn *table.Transaction, spec icego.PartitionSpec, a iceberg.Append) error {
	if v, ok := a.Props[table.CommitNumRetriesKey]; ok && v != "0" {
		return fmt.Errorf("%s=%s would turn iceberg-go's blind retries on", table.CommitNumRetriesKey, v)
	}
	if err := txn.SetProperties(a.Props); err != nil {
		return err
	}
	summary := icego.Properties(a.Summary)
	if len(a.Files) == 0 {
		// An empty snapshot still records the summary; AddDataFiles
		// would stage nothing at all.
		return txn.AddFiles(ctx, nil, summary, true)
	}
	files := make([]icego.DataFile, 0, len(a.Files))
	for _, f := range a.Files {
		df, err := dataFile(spec, f)
		if err != nil {
			return err
		}
		files = append(files, df)
	}
	return txn.AddDataFiles(ctx, files, summary, table.WithoutDuplicateCheck(), table.WithoutAutoNameMapping())
}

// dataFile is f as iceberg-go's manifest entry for spec.
func dataFile(spec icego.PartitionSpec, f iceberg.DataFile) (icego.DataFile, error) {
	fieldID := spec.Field(0).FieldID
	b, err := icego.NewDataFileBuilder(spec, icego.EntryContentData, f.Path, icego.ParquetFile,
		map[int]any{fieldID: icego.Date(f.Day)}, map[int]string{fieldID: "date"}, nil, f.Rows, f.Bytes)
	if err != nil {
		return nil, fmt.Errorf("data file %s: %w", f.Path, err)
	}
	if len(f.Columns) > 0 {
		values := make(map[int]int64, len(f.Columns))
		nulls := make(map[int]int64, len(f.Columns))
		for id, s := range f.Columns {
			values[id], nulls[id] = s.Values, s.Nulls
		}
		b.ValueCounts(values).NullValueCounts(nulls)
	}
	return b.Build(), nil
}

// Expire removes the snapshots r lets go, pinned to t.Current, then
// deletes the manifest lists and manifests only they referenced. Data
// files are never deleted.
func (c *Catalog) Expire(ctx context.Context, t *iceberg.Table, r iceberg.Retention) error {
	ctx = c.withAWS(ctx)
	txn, base, err := c.transaction(ctx, t, pins{current: true})
	if err != nil {
		return c.unstaged(ctx, "expire", t, err)
	}
	err = txn.ExpireSnapshots(
		// iceberg-go keeps a branch's newest n snapshots and those younger
		// than an age it measures on its own clock; counting here makes
		// the cut on the caller's clock (r.NowMs) instead.
		table.WithRetainLast(retainCount(base, r)),
		table.WithOlderThan(0),
		table.WithPostCommit(false), // its clean-up would delete data files too
	)
	if err != nil {
		return c.unstaged(ctx, "expire", t, err)
	}
	pre, err := txn.StagedTable()
	if err != nil {
		return c.unstaged(ctx, "expire", t, err)
	}
	if len(pre.Metadata().Snapshots()) == len(base.Snapshots()) {
		return nil // nothing to expire: no commit
	}
	if err := c.commit(ctx, "expire", t, txn); err != nil {
		return err
	}
	if err := c.deleteExpiredMetadata(ctx, t, base, pre.Metadata()); err != nil {
		// The expiry landed; the files left behind are orphans only.
		return fmt.Errorf("sqlcatalog: expire %s: committed, but cleaning up: %w", t.Ident, err)
	}
	return nil
}

// retainCount is how many of main's newest snapshots r keeps: at least
// r.KeepLast (and 1, the current one), and back to the oldest one
// younger than r.MaxAgeMs before r.NowMs if MaxAgeMs is set.
func retainCount(meta table.Metadata, r iceberg.Retention) int {
	n := max(r.KeepLast, 1)
	cur := meta.SnapshotByName(table.MainBranch)
	if cur == nil || r.MaxAgeMs <= 0 {
		return n
	}
	i := 0
	for _, s := range table.AncestorsOf(cur.SnapshotID, meta.SnapshotByID) {
		i++
		if s.TimestampMs >= r.NowMs-r.MaxAgeMs {
			n = max(n, i)
		}
	}
	return n
}

// deleteExpiredMetadata deletes the manifest lists of the snapshots in
// before but not in after, and the manifests only they listed.
func (c *Catalog) deleteExpiredMetadata(ctx context.Context, t *iceberg.Table, before, after table.Metadata) error {
	fsys, err := c.fsFunc(t.MetadataLocation)(ctx)
	if err != nil {
		return err
	}
	kept := map[string]bool{}
	for _, s := range after.Snapshots() {
		mans, err := s.Manifests(fsys)
		if err != nil {
			return err
		}
		for _, m := range mans {
			kept[m.FilePath()] = true
		}
	}
	var errs []error
	for _, s := range before.Snapshots() {
		if after.SnapshotByID(s.SnapshotID) != nil {
			continue
		}
		mans, err := s.Manifests(fsys)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, m := range mans {
			if !kept[m.FilePath()] {
				kept[m.FilePath()] = true // delete once
				errs = append(errs, removeIfPresent(fsys, m.FilePath()))
			}
		}
		if s.ManifestList != "" {
			errs = append(errs, removeIfPresent(fsys, s.ManifestList))
		}
	}
	return errors.Join(errs...)
}

// removeIfPresent deletes a file; one already gone is fine.
func removeIfPresent(fsys icegoio.IO, path string) error {
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// pinCurrent requires main to still be at t.Current (absent for 0).
func pinCurrent(t *iceberg.Table) table.Requirement {
	if t.Current == 0 {
		return table.AssertRefSnapshotID(table.MainBranch, nil)
	}
	id := t.Current
	return table.AssertRefSnapshotID(table.MainBranch, &id)
}

// pinSchema requires the current schema to still be t.Schema's.
func pinSchema(t *iceberg.Table) table.Requirement {
	return table.AssertCurrentSchemaID(t.Schema.ID)
}

// Pins name what a commit is pinned to: main's snapshot (t.Current),
// the current schema id (t.Schema's), or both.
type pins struct{ current, schema bool }

// transaction starts an iceberg-go transaction on exactly the metadata t
// was loaded from (never a fresh load), which it returns too, committing
// through a committer that enforces p.
func (c *Catalog) transaction(ctx context.Context, t *iceberg.Table, p pins) (*table.Transaction, table.Metadata, error) {
	meta, err := c.metadataOf(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	cm := &committer{cat: c.cat, unpinMain: !p.current}
	if p.current {
		cm.pins = append(cm.pins, pinCurrent(t))
	}
	if p.schema {
		cm.pins = append(cm.pins, pinSchema(t))
	}
	tbl := table.New(ident(t.Ident), meta, t.MetadataLocation, c.fsFunc(t.MetadataLocation), cm)
	txn := tbl.NewTransaction()
	if p.current {
		// Pinned in iceberg-go too, so no refresh-and-replay could ever
		// rewrite the requirement to a newer head.
		if err := txn.AssertRefSnapshotID(table.MainBranch); err != nil {
			return nil, nil, err
		}
	}
	return txn, meta, nil
}

// metadataOf returns the metadata t was loaded from: remembered by Load,
// or read again from t.MetadataLocation (metadata files never change).
func (c *Catalog) metadataOf(ctx context.Context, t *iceberg.Table) (table.Metadata, error) {
	if t == nil || t.MetadataLocation == "" || t.Schema == nil {
		return nil, errors.New("table state without metadata location or schema: pass a Table from Load or Create")
	}
	if meta, ok := c.recall(t.MetadataLocation); ok {
		return meta, nil
	}
	tbl, err := table.NewFromLocation(ctx, ident(t.Ident), t.MetadataLocation, c.fsFunc(t.MetadataLocation), nil)
	if err != nil {
		return nil, err
	}
	c.remember(t.MetadataLocation, tbl.Metadata())
	return tbl.Metadata(), nil
}

// unstaged is the error of a request that failed before its commit, so
// changed nothing: it wraps iceberg.ErrConflict if the table has moved
// since t (which is then the likely cause: t's metadata file deleted
// after later commits, a manifest of an expired snapshot gone, a column
// another writer added), else it is err as is.
func (c *Catalog) unstaged(ctx context.Context, op string, t *iceberg.Table, err error) error {
	if t == nil {
		return fmt.Errorf("sqlcatalog: %s: %w", op, err)
	}
	cur, lerr := c.cat.LoadTable(ctx, ident(t.Ident))
	if lerr == nil && cur.MetadataLocation() != t.MetadataLocation {
		return fmt.Errorf("sqlcatalog: %s %s: %w: it is at %s, not %s: %w", op, t.Ident, iceberg.ErrConflict, cur.MetadataLocation(), t.MetadataLocation, err)
	}
	if lerr != nil && noTable(lerr) {
		return fmt.Errorf("sqlcatalog: %s %s: %w: %w", op, t.Ident, iceberg.ErrNoTable, err)
	}
	return fmt.Errorf("sqlcatalog: %s %s: %w", op, t.Ident, err)
}

// commit commits txn and maps its error: a lost compare-and-swap or a
// failed pin wraps iceberg.ErrConflict (nothing changed); any other
// error is returned as is (the commit may have landed).
func (c *Catalog) commit(ctx context.Context, op string, t *iceberg.Table, txn *table.Transaction) error {
	next, err := txn.Commit(ctx)
	switch {
	case err == nil:
		c.remember(next.MetadataLocation(), next.Metadata())
		return nil
	case errors.Is(err, iceberg.ErrConflict):
		return fmt.Errorf("sqlcatalog: %s %s: %w", op, t.Ident, err)
	case errors.Is(err, table.ErrCommitFailed):
		return fmt.Errorf("sqlcatalog: %s %s: %w: %w", op, t.Ident, iceberg.ErrConflict, err)
	}
	return fmt.Errorf("sqlcatalog: %s %s: %w", op, t.Ident, err)
}

// A committer is the table.CatalogIO of one pinned commit: it adds the
// pins to the requirements iceberg-go sends, marks every failed
// requirement as a conflict, and refuses to be asked twice, so no retry
// can happen whatever the table's commit.retry.num-retries says.
type committer struct {
	cat  *sqlcat.Catalog
	pins []table.Requirement
	// unpinMain drops iceberg-go's own assertion on main's snapshot,
	// which every transaction carries, for a commit pinned to the schema
	// only.
	unpinMain bool
	asked     bool
}

// LoadTable is what iceberg-go calls to refresh before a retry.
func (cm *committer) LoadTable(context.Context, table.Identifier) (*table.Table, error) {
	return nil, fmt.Errorf("%w: iceberg-go tried to retry a commit; retries are off", iceberg.ErrConflict)
}

// CommitTable runs the SQL catalog's commit with the pins added. The SQL
// catalog loads the row, checks every requirement against the metadata
// it names, writes the new metadata file and swaps the row's
// metadata_location if it still names the file it loaded.
func (cm *committer) CommitTable(ctx context.Context, id table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	if cm.asked {
		return nil, "", fmt.Errorf("%w: iceberg-go tried to retry a commit; retries are off", iceberg.ErrConflict)
	}
	cm.asked = true
	all := make([]table.Requirement, 0, len(reqs)+len(cm.pins))
	for _, r := range slices.Concat(reqs, cm.pins) {
		if cm.unpinMain && r.GetType() == assertRefSnapshotID {
			continue
		}
		all = append(all, pinned{r})
	}
	return cm.cat.CommitTable(ctx, id, all, updates)
}

// assertRefSnapshotID is the type of table.AssertRefSnapshotID's
// requirements.
var assertRefSnapshotID = table.AssertRefSnapshotID(table.MainBranch, nil).GetType()

// pinned is a requirement whose failure wraps iceberg.ErrConflict: the
// SQL catalog checks requirements before it writes anything, so a
// failed one changed nothing.
type pinned struct{ table.Requirement }

func (p pinned) Validate(meta table.Metadata) error {
	if err := p.Requirement.Validate(meta); err != nil {
		return fmt.Errorf("%w: %w", iceberg.ErrConflict, err)
	}
	return nil
}
