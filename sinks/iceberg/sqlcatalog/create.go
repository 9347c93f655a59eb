package sqlcatalog

import (
	"context"
	"errors"
	"fmt"
	"maps"

	icego "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/skipprd/skipprd/sinks/iceberg"
)

// partitionFieldID is the id of the table's one partition field, the
// first id Iceberg gives partition fields.
const partitionFieldID = 1000

// forcedProps are set on every table Create makes, over the caller's.
var forcedProps = map[string]string{
	// The protocol must see every conflict: iceberg-go may not retry.
	table.CommitNumRetriesKey: "0",
}

// defaultProps are set on every table Create makes unless the caller
// sets them: they keep the metadata bounded.
var defaultProps = map[string]string{
	table.MetadataDeleteAfterCommitEnabledKey: "true",
	table.MetadataPreviousVersionsMaxKey:      "10",
	table.ManifestMergeEnabledKey:             "true",
	// iceberg-go merges the manifests of an append only once there are
	// this many; its default, 100, lets a table run with 99.
	table.ManifestMinMergeCountKey: "16",
}

// Create makes the namespace if it is missing, then the table: format
// version 2, schema with its field ids as given, spec
// day(spec.SourceColumn), props plus the package's own.
func (c *Catalog) Create(ctx context.Context, id iceberg.Ident, schema *icego.Schema, spec iceberg.PartitionSpec, props map[string]string) (*iceberg.Table, error) {
	ctx = c.withAWS(ctx)
	updates, tableUUID, err := c.createUpdates(id, schema, spec, props)
	if err != nil {
		return nil, fmt.Errorf("sqlcatalog: create %s: %w", id, err)
	}
	if err := c.ensureNamespace(ctx, id.Namespace); err != nil {
		return nil, fmt.Errorf("sqlcatalog: create %s: %w", id, err)
	}
	meta, loc, err := c.cat.CommitTable(ctx, ident(id), []table.Requirement{table.AssertCreate()}, updates)
	if err != nil {
		return c.createFailed(ctx, id, tableUUID, err)
	}
	return c.convert(ctx, id, meta, loc)
}

// createFailed tells what a failed create did: if the table exists now
// with our UUID, the create landed and only its answer was lost; with
// another UUID, another writer made the table first.
func (c *Catalog) createFailed(ctx context.Context, id iceberg.Ident, tableUUID uuid.UUID, err error) (*iceberg.Table, error) {
	tbl, lerr := c.cat.LoadTable(ctx, ident(id))
	switch {
	case lerr != nil:
		return nil, fmt.Errorf("sqlcatalog: create %s: %w", id, err)
	case tbl.Metadata().TableUUID() != tableUUID:
		return nil, fmt.Errorf("sqlcatalog: create %s: %w (%w)", id, iceberg.ErrTableExists, err)
	}
	return c.convert(ctx, id, tbl.Metadata(), tbl.MetadataLocation())
}

// createUpdates are the metadata updates that make the table from
// nothing. iceberg-go's CreateTable would renumber the schema's field
// ids; a create through CommitTable keeps them.
func (c *Catalog) createUpdates(id iceberg.Ident, schema *icego.Schema, spec iceberg.PartitionSpec, props map[string]string) ([]table.Update, uuid.UUID, error) {
	if schema == nil {
		return nil, uuid.Nil, errors.New("no schema")
	}
	fieldID := partitionFieldID
	ps, err := icego.NewPartitionSpecOpts(
		icego.AddPartitionFieldByName(spec.SourceColumn, spec.FieldName(), icego.DayTransform{}, schema, &fieldID))
	if err != nil {
		return nil, uuid.Nil, fmt.Errorf("partition spec day(%s): %w", spec.SourceColumn, err)
	}
	all := maps.Clone(defaultProps)
	maps.Copy(all, props)
	maps.Copy(all, forcedProps)
	delete(all, table.PropertyFormatVersion)
	tableUUID := uuid.New()
	sortOrder := table.UnsortedSortOrder
	return []table.Update{
		table.NewAssignUUIDUpdate(tableUUID),
		table.NewUpgradeFormatVersionUpdate(2),
		// AddSchema renumbers the schema it is given: give it a copy.
		table.NewAddSchemaUpdate(icego.NewSchemaWithIdentifiers(schema.ID, schema.IdentifierFieldIDs, schema.Fields()...)),
		table.NewSetCurrentSchemaUpdate(-1),
		// The SQL catalog applies these to a blank table whose schema 0 is
		// empty; ours became 1. Drop the empty one.
		table.NewRemoveSchemasUpdate([]int{0}),
		table.NewAddPartitionSpecUpdate(&ps, true),
		table.NewSetDefaultSpecUpdate(-1),
		table.NewAddSortOrderUpdate(&sortOrder),
		table.NewSetDefaultSortOrderUpdate(-1),
		table.NewSetLocationUpdate(c.location(id)),
		table.NewSetPropertiesUpdate(all),
	}, tableUUID, nil
}

// ensureNamespace creates the namespace unless it exists; a concurrent
// creator winning is fine.
func (c *Catalog) ensureNamespace(ctx context.Context, ns string) error {
	err := c.cat.CreateNamespace(ctx, table.Identifier{ns}, nil)
	if err == nil || errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil
	}
	if ok, cerr := c.cat.CheckNamespaceExists(ctx, table.Identifier{ns}); cerr == nil && ok {
		return nil
	}
	return fmt.Errorf("namespace %s: %w", ns, err)
}
