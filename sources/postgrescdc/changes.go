package postgrescdc

import (
	"slices"

	"github.com/jackc/pglogrepl"

	"github.com/skipprd/skipprd/engine/segment"
)

// relation is a Relation message as the stream applies it.
type relation struct {
	table *table // nil: not captured; its changes are passed over
	shape *shape
}

// onRelation learns a relation's columns. A relation the session does
// not know but should capture — it joined the publication, or was
// created again under a captured name — ends the session once
// (errResync) so that the next one reads it from the catalog and
// snapshots it; if that session still does not know it, it is passed
// over.
func (st *streamer) onRelation(m msgRelation) error {
	t := st.byOID[m.oid]
	if t == nil {
		if st.wanted(m.name) && !st.src.resynced[m.oid] {
			st.src.resynced[m.oid] = true
			st.src.cfg.Logger.Info("postgrescdc: a table to capture appeared in the stream; setting up again",
				"slot", st.src.cfg.Slot, "table", m.name.String(), "oid", m.oid)
			return errResync
		}
		st.rels[m.oid] = relation{}
		return nil
	}
	keyNames := t.keyNames // FULL marks every column as key: use the primary key
	if m.replIdent != 'f' {
		keyNames = nil
		for _, c := range m.columns {
			if c.key {
				keyNames = append(keyNames, c.name)
			}
		}
	}
	cols := make([]column, len(m.columns))
	for i, c := range m.columns {
		cols[i] = column{name: c.name, typOID: c.typOID}
	}
	sh, err := newShape(t.name, cols, keyNames)
	if err != nil {
		return err
	}
	st.rels[m.oid] = relation{table: t, shape: sh}
	return nil
}

// wanted reports whether a table of that name is one to capture.
func (st *streamer) wanted(n tableName) bool {
	if len(st.src.cfg.Tables) == 0 {
		return true
	}
	return slices.Contains(st.src.cfg.Tables, n.String())
}

// onTruncate fails closed on a captured table: a TRUNCATE names no
// rows, so no change could make the destination lose them.
func (st *streamer) onTruncate(m msgTruncate) error {
	for _, oid := range m.oids {
		if rel, ok := st.rels[oid]; ok && rel.table != nil {
			return streamf("table %s was truncated by the transaction committed at %s: the source cannot turn a TRUNCATE into row changes; "+
				"nothing from that transaction on is confirmed. Recapture the table under a new slot name, or advance the slot past it "+
				"(pg_replication_slot_advance) knowing the destination keeps the truncated rows", rel.table.name, st.tx.commit)
		}
	}
	return nil
}

// onChange turns an insert, update or delete into rows of its table.
func (st *streamer) onChange(m msgChange, walStart pglogrepl.LSN) error {
	if err := st.checkChange(walStart); err != nil {
		return err
	}
	rel, ok := st.rels[m.oid]
	if !ok {
		return invariantf("a change of relation %d before its Relation message", m.oid)
	}
	if rel.table == nil {
		return nil
	}
	rows, err := changeRows(rel, m, uint64(walStart))
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := st.add(rel.table, rel.shape, r); err != nil {
			return err
		}
	}
	return nil
}

// changeRows returns the rows of one change, all at order: an insert or
// an update is one row; a delete is one row of its key columns (the
// others NULL); an update that changes the key is a delete of the old
// key and an insert of the new.
func changeRows(rel relation, m msgChange, order uint64) ([]row, error) {
	sh, name := rel.shape, rel.table.name
	width := len(sh.names)
	if len(m.new) != 0 && len(m.new) != width || len(m.old) != 0 && len(m.old) != width {
		return nil, invariantf("table %s: a change of %d/%d values for %d columns", name, len(m.old), len(m.new), width)
	}
	if m.op == 'D' {
		r, err := keyRow(name, sh, m.old, segment.Delete, order)
		return []row{r}, err
	}
	values, err := newValues(name, sh, m)
	if err != nil {
		return nil, err
	}
	id, err := sh.identity(name, values)
	if err != nil {
		return nil, err
	}
	kind := segment.Insert
	if m.op == 'U' {
		kind = segment.Update
	}
	r := row{cdc: segment.CDCRow{Kind: kind, Identity: id, Order: order}, values: values}
	if m.old == nil {
		return []row{r}, nil
	}
	del, err := keyRow(name, sh, m.old, segment.Delete, order)
	if err != nil || string(del.cdc.Identity) == string(id) {
		return []row{r}, err
	}
	r.cdc.Kind = segment.Insert
	return []row{del, r}, nil
}

// keyRow is a row of old's key columns, the others NULL.
func keyRow(name tableName, sh *shape, old []tupleValue, kind segment.MutationKind, order uint64) (row, error) {
	if old == nil {
		return row{}, invariantf("table %s: a delete without its old key", name)
	}
	values := make([][]byte, len(sh.names))
	for _, k := range sh.key {
		if old[k].kind != valueText {
			return row{}, streamf("table %s: key column %q missing from the old row", name, sh.names[k])
		}
		values[k] = old[k].text
	}
	id, err := sh.identity(name, values)
	return row{cdc: segment.CDCRow{Kind: kind, Identity: id, Order: order}, values: values}, err
}

// newValues returns the new row's values. An unchanged TOAST value
// ('u': Postgres did not send it) is taken from the old row when the
// message has it: the whole old row (REPLICA IDENTITY FULL), or the old
// key for a key column. Otherwise the row cannot be written whole, and
// the source fails closed rather than write a NULL that is not there.
func newValues(name tableName, sh *shape, m msgChange) ([][]byte, error) {
	values := make([][]byte, len(m.new))
	for i, v := range m.new {
		switch v.kind {
		case valueText:
			values[i] = v.text
		case valueNull:
		case valueUnchanged:
			if m.old == nil || m.old[i].kind != valueText || (m.oldKind != 'O' && !slices.Contains(sh.key, i)) {
				return nil, streamf("table %s column %q: an update left this TOASTed value unchanged, so Postgres did not send it "+
					"and the source cannot write the row whole: ALTER TABLE %s REPLICA IDENTITY FULL makes it send the old row",
					name, sh.names[i], name)
			}
			values[i] = m.old[i].text
		}
	}
	return values, nil
}
