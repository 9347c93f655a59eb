package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/skipprd/skipprd/engine"
)

// ensureTable makes tx.Table able to take tx.Columns — creating it,
// adding the columns it lacks, widening those too narrow for its values —
// and returns the table's columns.
//
// Most jobs find their columns in place and take no lock: columns are
// only ever added or widened, never dropped or narrowed, so values that
// fit what a job read still fit. A job
// that needs DDL takes the table's advisory lock (held to its commit) and
// reads again, since the job before it in the lock may have done the
// same DDL, or a conflicting one.
func (p *PGX) ensureTable(ctx context.Context, dbtx pgx.Tx, tx *Tx) ([]Column, error) {
	have, err := p.readColumns(ctx, dbtx, tx.Table)
	if err != nil {
		return nil, err
	}
	change, err := Reconcile(tx.Table, have, tx.Columns)
	if err != nil || (have != nil && change.Empty()) {
		return have, err
	}
	if err := lockTable(ctx, dbtx, p.schema, tx.Table); err != nil {
		return nil, fmt.Errorf("postgres: job %s: %w", tx.JobID, err)
	}
	if have, err = p.readColumns(ctx, dbtx, tx.Table); err != nil {
		return nil, err
	}
	if change, err = Reconcile(tx.Table, have, tx.Columns); err != nil {
		return nil, err
	}
	switch {
	case have == nil:
		return tx.Columns, p.createTable(ctx, dbtx, tx)
	case !change.Empty():
		return change.Apply(have), p.alterColumns(ctx, dbtx, tx.Table, change)
	}
	return have, nil
}

// readColumns returns table's columns in order, or nil when there is no
// such table. A view or another relation by that name refuses the job.
func (p *PGX) readColumns(ctx context.Context, dbtx pgx.Tx, table string) ([]Column, error) {
	rows, err := dbtx.Query(ctx, `SELECT c.relkind::text, a.attname::text, format_type(a.atttypid, a.atttypmod)
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE n.nspname = $1 AND c.relname = $2
		ORDER BY a.attnum`, p.schema, table)
	if err != nil {
		return nil, fmt.Errorf("postgres: reading the columns of %s: %w", p.ident(table), err)
	}
	defer rows.Close()
	cols := []Column{} // non-nil: the table exists once a row comes back
	found := false
	for rows.Next() {
		var kind string
		var name, typ *string // NULL for a table without columns
		if err := rows.Scan(&kind, &name, &typ); err != nil {
			return nil, fmt.Errorf("postgres: reading the columns of %s: %w", p.ident(table), err)
		}
		found = true
		if kind != "r" && kind != "p" {
			return nil, fmt.Errorf("%w: postgres: %s exists and is not a table (relkind %q)", engine.ErrCannotApply, p.ident(table), kind)
		}
		if name != nil && typ != nil {
			cols = append(cols, Column{*name, *typ})
		}
		if len(cols) > ColumnsMax {
			return nil, fmt.Errorf("postgres: %s has more than %d columns", p.ident(table), ColumnsMax)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: reading the columns of %s: %w", p.ident(table), err)
	}
	if !found {
		return nil, nil
	}
	return cols, nil
}

// createTable creates tx.Table with tx.Columns. A CDC table's identity
// is its primary key (the upsert's conflict target); its order and
// tombstone flag are never NULL.
func (p *PGX) createTable(ctx context.Context, dbtx pgx.Tx, tx *Tx) error {
	var b strings.Builder
	b.WriteString("CREATE TABLE " + p.ident(tx.Table) + " (")
	for i, c := range tx.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(c.Name) + " " + c.Type)
		switch c.Name {
		case ColIdentity:
			b.WriteString(" PRIMARY KEY")
		case ColOrder, ColDeleted:
			b.WriteString(" NOT NULL")
		}
	}
	b.WriteString(")")
	if _, err := dbtx.Exec(ctx, b.String()); err != nil {
		return fmt.Errorf("postgres: job %s: creating %s: %w", tx.JobID, p.ident(tx.Table), err)
	}
	return nil
}

// alterColumns widens and adds table's columns in one statement;
// existing rows read NULL in an added column. Widening rewrites the
// table (Postgres converts every value): it happens once per column and
// type, when a job first brings the wider values.
func (p *PGX) alterColumns(ctx context.Context, dbtx pgx.Tx, table string, c Change) error {
	var parts []string
	for _, w := range c.Widen {
		parts = append(parts, " ALTER COLUMN "+quote(w.Name)+" TYPE "+w.Type)
	}
	for _, a := range c.Add {
		parts = append(parts, " ADD COLUMN "+quote(a.Name)+" "+a.Type)
	}
	if _, err := dbtx.Exec(ctx, "ALTER TABLE "+p.ident(table)+strings.Join(parts, ",")); err != nil {
		return fmt.Errorf("postgres: adding %d and widening %d columns of %s: %w", len(c.Add), len(c.Widen), p.ident(table), err)
	}
	return nil
}

// lockTable takes the advisory lock that serializes DDL on schema.table,
// held until the transaction ends. Two jobs creating one table, or adding
// one column with different types, then run one after the other: the
// second sees the first's work instead of failing on it.
func lockTable(ctx context.Context, dbtx pgx.Tx, schema, table string) error {
	if _, err := dbtx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", tableLockKey(schema, table)); err != nil {
		return fmt.Errorf("postgres: locking %s for DDL: %w", pgx.Identifier{schema, table}.Sanitize(), err)
	}
	return nil
}

// tableLockKey is the advisory lock key of schema.table: FNV-1a over a
// prefix and the names. Another application's key could collide; that
// costs waiting, never correctness.
func tableLockKey(schema, table string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("skipprd ddl\x00" + schema + "\x00" + table))
	return int64(h.Sum64())
}

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// fixedTypes are the column types PGType produces besides numeric(p,s).
var fixedTypes = map[string]bool{
	"smallint": true, "integer": true, "bigint": true, "real": true,
	"double precision": true, "boolean": true, "text": true, "bytea": true,
	"date": true, "time without time zone": true, "jsonb": true,
	"timestamp with time zone": true, "timestamp without time zone": true,
}

// knownType reports whether t is a type PGType produces; only those are
// spliced into DDL.
func knownType(t string) bool {
	if fixedTypes[t] {
		return true
	}
	inner, ok := strings.CutPrefix(t, "numeric(")
	if !ok {
		return false
	}
	if inner, ok = strings.CutSuffix(inner, ")"); !ok {
		return false
	}
	ps, ss, ok := strings.Cut(inner, ",")
	if !ok {
		return false
	}
	prec, perr := strconv.Atoi(ps)
	scale, serr := strconv.Atoi(ss)
	return perr == nil && serr == nil && prec >= 1 && prec <= numericPrecisionMax &&
		scale >= -numericScaleMax && scale <= numericScaleMax &&
		t == fmt.Sprintf("numeric(%d,%d)", prec, scale)
}
