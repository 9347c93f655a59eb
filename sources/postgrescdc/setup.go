package postgrescdc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// serverVersionMin: publication column lists and row filters, which
// setup reads from pg_publication_tables, came with PostgreSQL 15.
const serverVersionMin = 150000

// catalogTable is what setup reads of a captured table.
type catalogTable struct {
	name      tableName
	oid       uint32
	replIdent byte     // pg_class.relreplident: 'd', 'n', 'f', 'i'
	columns   []column // the published columns, in column order
	keyNames  []string // the replica identity key (FULL: the primary key)
	rowFilter string   // the publication's row filter, "" if none
}

// checkServer checks the version and wal_level.
func checkServer(ctx context.Context, conn *pgx.Conn) error {
	var version int
	var level string
	err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int, current_setting('wal_level')").Scan(&version, &level)
	if err != nil {
		return fmt.Errorf("read server settings: %w", err)
	}
	if version < serverVersionMin {
		return setupf("the server is version %d; the source needs PostgreSQL 15 or later", version)
	}
	if level != "logical" {
		return setupf("the server runs with wal_level=%s; logical replication needs wal_level=logical "+
			"(ALTER SYSTEM SET wal_level = logical, then restart the server; scripts/pg-setup does it for a local server)", level)
	}
	return nil
}

// ensurePublication creates the publication if it does not exist, and
// checks that an existing one publishes inserts, updates and deletes.
// Another source sharing the publication may create it at the same
// moment: then it exists, and is checked.
func ensurePublication(ctx context.Context, conn *pgx.Conn, pub string, tables []string) error {
	var ok bool
	err := conn.QueryRow(ctx, "SELECT pubinsert AND pubupdate AND pubdelete FROM pg_publication WHERE pubname = $1", pub).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		err = createPublication(ctx, conn, pub, tables)
		if !isDuplicate(err) {
			return err
		}
		err = conn.QueryRow(ctx, "SELECT pubinsert AND pubupdate AND pubdelete FROM pg_publication WHERE pubname = $1", pub).Scan(&ok)
	}
	switch {
	case err != nil:
		return fmt.Errorf("read publication %s: %w", pub, err)
	case !ok:
		return setupf("publication %s does not publish all of insert, update and delete: "+
			"ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate')", pub, pub)
	}
	return nil
}

func createPublication(ctx context.Context, conn *pgx.Conn, pub string, tables []string) error {
	what := "ALL TABLES"
	if len(tables) > 0 {
		quoted := make([]string, len(tables))
		for i, t := range tables {
			n, err := parseTableName(t)
			if err != nil {
				return err
			}
			quoted[i] = pgx.Identifier{n.schema, n.table}.Sanitize()
		}
		what = "TABLE " + strings.Join(quoted, ", ")
	}
	if _, err := conn.Exec(ctx, "CREATE PUBLICATION "+pgx.Identifier{pub}.Sanitize()+" FOR "+what); err != nil {
		return fmt.Errorf("create publication %s FOR %s: %w", pub, what, err)
	}
	return nil
}

// isDuplicate reports an error of creating what exists: duplicate_object,
// or, when two sessions create it at once, unique_violation on the
// catalog's index.
func isDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42710" || pgErr.Code == "23505")
}

// capturedTables returns the tables to capture: those configured (each
// must be in the publication), or all the publication's.
func capturedTables(ctx context.Context, conn *pgx.Conn, pub string, configured []string) ([]tableName, error) {
	rows, err := conn.Query(ctx, "SELECT schemaname::text, tablename::text FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1, 2", pub)
	if err != nil {
		return nil, fmt.Errorf("list the tables of publication %s: %w", pub, err)
	}
	published, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tableName, error) {
		var n tableName
		return n, r.Scan(&n.schema, &n.table)
	})
	if err != nil {
		return nil, fmt.Errorf("list the tables of publication %s: %w", pub, err)
	}
	if len(configured) == 0 {
		return published, checkNamespaces(published)
	}
	out := make([]tableName, 0, len(configured))
	for _, t := range configured {
		n, err := parseTableName(t)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(published, n) {
			return nil, setupf("table %s is not in publication %s: ALTER PUBLICATION %s ADD TABLE %s", n, pub, pub, n)
		}
		out = append(out, n)
	}
	return out, nil
}

// checkNamespaces checks a publication's tables can all be captured:
// names by the namespace rule, one table per name.
func checkNamespaces(tables []tableName) error {
	seen := map[string]tableName{}
	for _, n := range tables {
		if err := n.check(); err != nil {
			return setupf("publication table %s cannot be captured (list the tables to capture instead): %v", n, err)
		}
		if prev, ok := seen[n.table]; ok {
			return setupf("publication tables %s and %s would share namespace %q; list the tables to capture instead", prev, n, n.table)
		}
		seen[n.table] = n
	}
	return nil
}

// readTable reads what the source needs of a published table.
func readTable(ctx context.Context, conn *pgx.Conn, pub string, n tableName) (catalogTable, error) {
	t := catalogTable{name: n}
	var (
		oid       int64
		ident     string
		filter    *string
		published []string
	)
	err := conn.QueryRow(ctx, `
		SELECT c.oid::int8, c.relreplident::text, p.attnames::text[], p.rowfilter
		FROM pg_publication_tables p
		JOIN pg_namespace s ON s.nspname = p.schemaname
		JOIN pg_class c ON c.relnamespace = s.oid AND c.relname = p.tablename
		WHERE p.pubname = $1 AND p.schemaname = $2 AND p.tablename = $3`, pub, n.schema, n.table).
		Scan(&oid, &ident, &published, &filter)
	if err != nil {
		return t, fmt.Errorf("read table %s of publication %s: %w", n, pub, err)
	}
	t.oid, t.replIdent = uint32(oid), ident[0]
	if filter != nil {
		t.rowFilter = *filter
	}
	if t.columns, err = readColumns(ctx, conn, t.oid, published); err != nil {
		return t, fmt.Errorf("read the columns of %s: %w", n, err)
	}
	if t.keyNames, err = readKey(ctx, conn, t.oid, t.replIdent); err != nil {
		return t, fmt.Errorf("read the key of %s: %w", n, err)
	}
	return t, t.check()
}

// readColumns returns the published columns in column order; generated
// columns are never published.
func readColumns(ctx context.Context, conn *pgx.Conn, oid uint32, published []string) ([]column, error) {
	rows, err := conn.Query(ctx, `
		SELECT attname::text, atttypid::int8 FROM pg_attribute
		WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped AND attgenerated = '' AND attname = ANY($2)
		ORDER BY attnum`, int64(oid), published)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		var typ int64
		err := r.Scan(&c.name, &typ)
		c.typOID = uint32(typ)
		return c, err
	})
}

// readKey returns the replica identity key's columns: the primary key
// for DEFAULT and FULL (FULL marks every column as key in the stream,
// but a row's identity must not change when a non-key column does), the
// chosen index's columns for USING INDEX.
func readKey(ctx context.Context, conn *pgx.Conn, oid uint32, ident byte) ([]string, error) {
	rows, err := conn.Query(ctx, `
		SELECT a.attname::text FROM pg_index i
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
		WHERE i.indrelid = $1 AND CASE WHEN $2 = 'i' THEN i.indisreplident ELSE i.indisprimary END
		ORDER BY a.attnum`, int64(oid), string(ident))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// check reports a table the source cannot capture.
func (t catalogTable) check() error {
	switch {
	case t.replIdent == 'n':
		return setupf("table %s has REPLICA IDENTITY NOTHING: its updates and deletes name no row; give it a primary key and REPLICA IDENTITY DEFAULT", t.name)
	case len(t.keyNames) == 0:
		return setupf("table %s has no primary key (or replica identity index): the source identifies rows by it", t.name)
	}
	for _, k := range t.keyNames {
		if !slices.ContainsFunc(t.columns, func(c column) bool { return c.name == k }) {
			return setupf("table %s: key column %q is not published (the publication's column list leaves it out)", t.name, k)
		}
	}
	return nil
}
