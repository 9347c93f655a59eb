package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// A CDC job is applied in two statements after its COPY:
//
//	COPY pg_temp.skipprd_stage (s_identity, s_order, s_deleted, s_pos, c0 … cN)
//	   one row per change, in job order (s_pos)
//	INSERT INTO table AS dst (_cdc_identity, _cdc_order, _cdc_deleted, data…)
//	SELECT DISTINCT ON (s_identity) … ORDER BY s_identity, s_order DESC, s_pos
//	ON CONFLICT (_cdc_identity) DO UPDATE SET every column = EXCLUDED's
//	WHERE dst._cdc_order < EXCLUDED._cdc_order
//
// That is ApplyChange, per identity: within the job, DISTINCT ON keeps
// the change of greatest order, the first of equal orders (the one a
// sequential apply would keep); against the table, a change lands only
// over a lower order. Deletes land as tombstones like any change. The
// row then reflects its change alone: the table's columns the job lacks
// are set to NULL.
//
// The staging table's columns are named by position, never by the
// source's names, so no data column can collide with s_pos; it is
// created in each transaction with the job's own types and dropped at
// its end.

const stageTable = "skipprd_stage"

// stagePrefixColumns: identity, order, deleted flag, position.
const stagePrefixColumns = 4

// upsertChanges applies a CDC job's changes to its table, whose columns
// (after ensureTable) are have.
func (p *PGX) upsertChanges(ctx context.Context, dbtx pgx.Tx, tx *Tx, have []Column) error {
	data := tx.Columns[len(cdcColumns):]
	if _, err := dbtx.Exec(ctx, stageDDL(data)); err != nil {
		return fmt.Errorf("postgres: job %s: creating the staging table: %w", tx.JobID, err)
	}
	src := newRowSource(tx, true)
	n, err := dbtx.CopyFrom(ctx, pgx.Identifier{"pg_temp", stageTable}, stageNames(len(data)), src)
	if err := copyResult(tx, src, n, err, "COPY into the staging table"); err != nil {
		return err
	}
	if _, err := dbtx.Exec(ctx, upsertSQL(p.ident(tx.Table), data, have)); err != nil {
		return fmt.Errorf("postgres: job %s: applying %d changes to %s: %w", tx.JobID, tx.Rows, p.ident(tx.Table), err)
	}
	return nil
}

// stageNames are the staging table's columns, in COPY order.
func stageNames(dataColumns int) []string {
	names := []string{"s_identity", "s_order", "s_deleted", "s_pos"}
	for i := range dataColumns {
		names = append(names, fmt.Sprintf("c%d", i))
	}
	return names
}

func stageDDL(data []Column) string {
	var b strings.Builder
	b.WriteString("CREATE TEMP TABLE " + stageTable + " (s_identity bytea NOT NULL, s_order numeric(20,0) NOT NULL, s_deleted boolean NOT NULL, s_pos bigint NOT NULL")
	for i, c := range data {
		fmt.Fprintf(&b, ", c%d %s", i, c.Type)
	}
	b.WriteString(") ON COMMIT DROP")
	return b.String()
}

// upsertSQL is the one statement that applies the staged changes to
// table (quoted), whose columns are have; data are the job's.
func upsertSQL(table string, data, have []Column) string {
	insert := []string{quote(ColIdentity), quote(ColOrder), quote(ColDeleted)}
	sel := []string{"s_identity", "s_order", "s_deleted"}
	set := []string{quote(ColOrder) + " = EXCLUDED." + quote(ColOrder), quote(ColDeleted) + " = EXCLUDED." + quote(ColDeleted)}
	inJob := map[string]bool{}
	for i, c := range data {
		q := quote(c.Name)
		insert = append(insert, q)
		sel = append(sel, fmt.Sprintf("c%d", i))
		set = append(set, q+" = EXCLUDED."+q)
		inJob[c.Name] = true
	}
	for _, c := range have {
		if !inJob[c.Name] && !isCDCColumn(c.Name) {
			set = append(set, quote(c.Name)+" = NULL")
		}
	}
	return "INSERT INTO " + table + " AS dst (" + strings.Join(insert, ", ") + ")" +
		" SELECT DISTINCT ON (s_identity) " + strings.Join(sel, ", ") +
		" FROM pg_temp." + stageTable +
		" ORDER BY s_identity, s_order DESC, s_pos" +
		" ON CONFLICT (" + quote(ColIdentity) + ") DO UPDATE SET " + strings.Join(set, ", ") +
		" WHERE dst." + quote(ColOrder) + " < EXCLUDED." + quote(ColOrder)
}

func isCDCColumn(name string) bool {
	for _, c := range cdcColumns {
		if c.Name == name {
			return true
		}
	}
	return false
}
