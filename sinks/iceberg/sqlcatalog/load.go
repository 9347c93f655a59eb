package sqlcatalog

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	icego "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/skipprd/skipprd/sinks/iceberg"
)

// Load reads the table's row and the metadata file it names.
func (c *Catalog) Load(ctx context.Context, id iceberg.Ident) (*iceberg.Table, error) {
	ctx = c.withAWS(ctx)
	tbl, err := c.cat.LoadTable(ctx, ident(id))
	if err != nil {
		if noTable(err) {
			return nil, fmt.Errorf("sqlcatalog: load %s: %w (%w)", id, iceberg.ErrNoTable, err)
		}
		return nil, fmt.Errorf("sqlcatalog: load %s: %w", id, err)
	}
	return c.convert(ctx, id, tbl.Metadata(), tbl.MetadataLocation())
}

// convert makes our Table of the metadata read from loc, and remembers
// the metadata so a commit pinned to this state is built on exactly it.
func (c *Catalog) convert(ctx context.Context, id iceberg.Ident, meta table.Metadata, loc string) (*iceberg.Table, error) {
	spec, err := specOf(meta)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: table %s: %w", id, err)
	}
	t := &iceberg.Table{
		Ident:            id,
		Location:         meta.Location(),
		Schema:           meta.CurrentSchema(),
		Spec:             spec,
		Snapshots:        snapshotsOf(meta),
		Props:            maps.Clone(map[string]string(meta.Properties())),
		MetadataLocation: loc,
		MetadataLog:      len(slices.Collect(meta.PreviousFiles())),
	}
	if t.Props == nil {
		t.Props = map[string]string{}
	}
	if cur := meta.SnapshotByName(table.MainBranch); cur != nil {
		t.Current = cur.SnapshotID
		fs, err := c.fsFunc(loc)(ctx)
		if err != nil {
			return nil, fmt.Errorf("sqlcatalog: table %s: %w", id, err)
		}
		manifests, err := cur.Manifests(fs)
		if err != nil {
			return nil, fmt.Errorf("sqlcatalog: table %s: read manifest list of snapshot %d: %w", id, cur.SnapshotID, err)
		}
		t.Manifests = len(manifests)
	}
	c.remember(loc, meta)
	return t, nil
}

// specOf returns the table's partition spec, which must be one day
// transform of a column, named after it with "_day".
func specOf(meta table.Metadata) (iceberg.PartitionSpec, error) {
	ps := meta.PartitionSpec()
	if ps.NumFields() != 1 {
		return iceberg.PartitionSpec{}, fmt.Errorf("partition spec %s: want one day(column) field", ps.String())
	}
	f := ps.Field(0)
	name, ok := meta.CurrentSchema().FindColumnName(f.SourceID())
	if _, day := f.Transform.(icego.DayTransform); !day || !ok {
		return iceberg.PartitionSpec{}, fmt.Errorf("partition spec %s: want one day(column) field", ps.String())
	}
	spec := iceberg.PartitionSpec{SourceColumn: name}
	if f.Name != spec.FieldName() {
		return iceberg.PartitionSpec{}, fmt.Errorf("partition field %q: want it named %q", f.Name, spec.FieldName())
	}
	return spec, nil
}

// snapshotsOf lists the retained snapshots, oldest (lowest sequence
// number) first.
func snapshotsOf(meta table.Metadata) []iceberg.Snapshot {
	snaps := slices.Clone(meta.Snapshots())
	slices.SortStableFunc(snaps, func(a, b table.Snapshot) int {
		if a.SequenceNumber != b.SequenceNumber {
			return cmpInt(a.SequenceNumber, b.SequenceNumber)
		}
		return cmpInt(a.TimestampMs, b.TimestampMs)
	})
	out := make([]iceberg.Snapshot, 0, len(snaps))
	for _, s := range snaps {
		out = append(out, iceberg.Snapshot{
			ID:          s.SnapshotID,
			Parent:      deref(s.ParentSnapshotID),
			TimestampMs: s.TimestampMs,
			Summary:     summaryOf(s.Summary),
		})
	}
	return out
}

// summaryOf is a snapshot summary as a map, "operation" included.
func summaryOf(s *table.Summary) map[string]string {
	out := map[string]string{}
	if s == nil {
		return out
	}
	maps.Copy(out, s.Properties)
	if s.Operation != "" {
		out["operation"] = string(s.Operation)
	}
	return out
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// metaCacheSize bounds the metadata the catalog remembers; a commit
// pinned to a state no longer remembered reads its metadata file again.
const metaCacheSize = 32

// metaCache maps metadata locations to the metadata read from them,
// forgetting the oldest entry when full. Metadata files are immutable,
// so an entry never goes stale.
type metaCache struct {
	byLoc map[string]table.Metadata
	order []string
}

// remember caches the metadata read from loc.
func (c *Catalog) remember(loc string, meta table.Metadata) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.metas.byLoc == nil {
		c.metas.byLoc = make(map[string]table.Metadata, metaCacheSize)
	}
	if _, ok := c.metas.byLoc[loc]; ok {
		return
	}
	if len(c.metas.order) == metaCacheSize {
		delete(c.metas.byLoc, c.metas.order[0])
		c.metas.order = c.metas.order[1:]
	}
	c.metas.byLoc[loc] = meta
	c.metas.order = append(c.metas.order, loc)
}

// recall returns the metadata cached for loc, if any.
func (c *Catalog) recall(loc string) (table.Metadata, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	meta, ok := c.metas.byLoc[loc]
	return meta, ok
}

// Tables lists the tables of one namespace, sorted by name; none when
// the namespace does not exist yet.
func (c *Catalog) Tables(ctx context.Context, namespace string) ([]iceberg.Ident, error) {
	var out []iceberg.Ident
	for id, err := range c.cat.ListTables(c.withAWS(ctx), table.Identifier{namespace}) {
		if err != nil {
			if noTable(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("sqlcatalog: list the tables of %s: %w", namespace, err)
		}
		out = append(out, iceberg.Ident{Namespace: namespace, Name: id[len(id)-1]})
	}
	slices.SortFunc(out, func(a, b iceberg.Ident) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DataFiles lists the paths of the data files of the table's current
// snapshot (none before its first), as their manifests record them:
// what a reader of the table reads. Chaos mode judges the lake by them.
func (c *Catalog) DataFiles(ctx context.Context, id iceberg.Ident) ([]string, error) {
	ctx = c.withAWS(ctx)
	tbl, err := c.cat.LoadTable(ctx, ident(id))
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: load %s: %w", id, err)
	}
	var out []string
	err = c.eachFile(ctx, id, tbl.MetadataLocation(), tbl.Metadata(), func(df icego.DataFile) error {
		out = append(out, df.FilePath())
		return nil
	})
	return out, err
}

// Files implements iceberg.Catalog: the data files of t.Current, read
// from the metadata t was loaded from.
func (c *Catalog) Files(ctx context.Context, t *iceberg.Table) ([]iceberg.DataFile, error) {
	ctx = c.withAWS(ctx)
	meta, err := c.metadataOf(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: files of %s: %w", t.Ident, err)
	}
	var out []iceberg.DataFile
	err = c.eachFile(ctx, t.Ident, t.MetadataLocation, meta, func(df icego.DataFile) error {
		f, err := fromDataFile(df)
		if err != nil {
			return fmt.Errorf("sqlcatalog: table %s: %w", t.Ident, err)
		}
		out = append(out, f)
		return nil
	})
	return out, err
}

// eachFile calls fn with every live data file of meta's main snapshot.
func (c *Catalog) eachFile(ctx context.Context, id iceberg.Ident, loc string, meta table.Metadata, fn func(icego.DataFile) error) error {
	cur := meta.SnapshotByName(table.MainBranch)
	if cur == nil {
		return nil
	}
	fs, err := c.fsFunc(loc)(ctx)
	if err != nil {
		return fmt.Errorf("sqlcatalog: table %s: %w", id, err)
	}
	manifests, err := cur.Manifests(fs)
	if err != nil {
		return fmt.Errorf("sqlcatalog: table %s: read manifest list of snapshot %d: %w", id, cur.SnapshotID, err)
	}
	for _, m := range manifests {
		for e, err := range m.Entries(fs, true) {
			if err != nil {
				return fmt.Errorf("sqlcatalog: table %s: read manifest %s: %w", id, m.FilePath(), err)
			}
			if err := fn(e.DataFile()); err != nil {
				return err
			}
		}
	}
	return nil
}

// fromDataFile is a manifest's data file as the sink knows files: its
// path, rows, bytes and day (the one partition value, a date).
func fromDataFile(df icego.DataFile) (iceberg.DataFile, error) {
	f := iceberg.DataFile{Path: df.FilePath(), Rows: df.Count(), Bytes: df.FileSizeBytes()}
	if df.ContentType() != icego.EntryContentData {
		return f, fmt.Errorf("file %s holds %s, not data: this sink writes no delete files", f.Path, df.ContentType())
	}
	part := df.Partition()
	if len(part) != 1 {
		return f, fmt.Errorf("file %s has %d partition values; the sink's tables have one, a day", f.Path, len(part))
	}
	for _, v := range part {
		switch d := v.(type) {
		case icego.Date:
			f.Day = int32(d)
		case int32:
			f.Day = d
		default:
			return f, fmt.Errorf("file %s: its partition value %v (%T) is not a day", f.Path, v, v)
		}
	}
	return f, nil
}
