package postgrescdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// outputPlugin is the logical decoding plugin the slot uses: the one
// built into Postgres.
const outputPlugin = "pgoutput"

// slotState is what the source reads of its slot.
type slotState struct {
	exists    bool
	confirmed pglogrepl.LSN // confirmed_flush_lsn: where streaming resumes
}

// readSlot reads the slot and checks it is one the source can use: a
// logical pgoutput slot of this database that has not lost WAL.
func readSlot(ctx context.Context, conn *pgx.Conn, slot string) (slotState, error) {
	var plugin, kind, status, confirmed *string
	var sameDB bool
	err := conn.QueryRow(ctx, `
		SELECT plugin::text, slot_type, wal_status, confirmed_flush_lsn::text, database = current_database()
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&plugin, &kind, &status, &confirmed, &sameDB)
	if errors.Is(err, pgx.ErrNoRows) {
		return slotState{}, nil
	}
	if err != nil {
		return slotState{}, fmt.Errorf("read slot %s: %w", slot, err)
	}
	switch {
	case kind == nil || *kind != "logical" || plugin == nil || *plugin != outputPlugin:
		return slotState{}, setupf("slot %s exists but is not a logical slot of the %s plugin", slot, outputPlugin)
	case !sameDB:
		return slotState{}, setupf("slot %s exists but belongs to another database", slot)
	case status != nil && *status == "lost":
		return slotState{}, setupf("slot %s has lost WAL it needed (max_slot_wal_keep_size): changes are missing; "+
			"capture with a new slot name (its tables are snapshotted again)", slot)
	case confirmed == nil:
		return slotState{}, setupf("slot %s has no confirmed_flush_lsn", slot)
	}
	lsn, err := pglogrepl.ParseLSN(*confirmed)
	if err != nil {
		return slotState{}, fmt.Errorf("slot %s: confirmed_flush_lsn %q: %w", slot, *confirmed, err)
	}
	return slotState{exists: true, confirmed: lsn}, nil
}

// ensureSlot returns the slot's state, creating it if it does not exist
// — unless the source has offsets under this slot: then the slot was
// dropped after the source confirmed changes with it, and a new one
// would silently miss every change made since.
func ensureSlot(ctx context.Context, conn *pgx.Conn, repl *pgconn.PgConn, slot string, ranBefore bool) (slotState, error) {
	st, err := readSlot(ctx, conn, slot)
	if err != nil || st.exists {
		return st, err
	}
	if ranBefore {
		return st, setupf("slot %s does not exist, yet the offsets show this source streamed from it: "+
			"the changes since it was dropped are lost to it; capture with a new slot name "+
			"(its tables are snapshotted again; rows deleted meanwhile stay in the destination)", slot)
	}
	// The slot's consistent point precedes every snapshot the source
	// takes afterwards, so every change a snapshot misses is streamed.
	_, err = pglogrepl.CreateReplicationSlot(ctx, repl, slot, outputPlugin,
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
	if err != nil && !isDuplicate(err) { // a duplicate: created meanwhile, read below
		return st, fmt.Errorf("create slot %s: %w", slot, err)
	}
	st, err = readSlot(ctx, conn, slot)
	if err == nil && !st.exists {
		err = fmt.Errorf("slot %s: created, then not found", slot)
	}
	return st, err
}
