package main

import (
	"fmt"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// progress is one progress line's figures.
type progress struct {
	Uptime       time.Duration
	Ingested     uint64 // rows the sources handed to the host, acked or awaiting an answer
	Acked        uint64 // rows acked to the source (this run): committed now, or resent after a restart and found committed
	Applied      uint64 // rows applied to sinks (this run)
	LiveSegments int    // committed segments not yet reclaimed
	AckDelay     time.Duration
	PersistEMA   time.Duration
	// The local-disk WAL's (printed only when DiskWAL is set).
	DiskWAL         bool
	WALSyncs        uint64 // group commits (fsyncs) that succeeded (this run)
	WALSyncFailures uint64 // writes or fsyncs that failed, each poisoning a log segment
}

func progressOf(uptime time.Duration, ingested, acked uint64, eng engine.Stats, diskWAL bool) progress {
	return progress{
		Uptime:          uptime,
		Ingested:        ingested,
		Acked:           acked,
		Applied:         eng.RowsApplied,
		LiveSegments:    eng.LiveSegments,
		AckDelay:        eng.AckDelayEMA,
		PersistEMA:      eng.PersistEMA,
		DiskWAL:         diskWAL,
		WALSyncs:        eng.WALSyncs,
		WALSyncFailures: eng.WALSyncFailures,
	}
}

// String is the progress line, fixed keys in a fixed order so that it
// can be grepped and parsed:
//
//	progress up=12s ingested=240000 acked=236000 applied=180000 live_segments=3 ack_delay=212ms persist_ema=41ms
//
// and with the local-disk WAL two more at the end:
//
//	… persist_ema=41ms wal_syncs=5120 wal_sync_failures=0
//
// An average not measured yet prints as "-".
func (p progress) String() string {
	line := fmt.Sprintf("progress up=%s ingested=%d acked=%d applied=%d live_segments=%d ack_delay=%s persist_ema=%s",
		p.Uptime.Round(time.Second), p.Ingested, p.Acked, p.Applied, p.LiveSegments, ms(p.AckDelay), ms(p.PersistEMA))
	if p.DiskWAL {
		line += fmt.Sprintf(" wal_syncs=%d wal_sync_failures=%d", p.WALSyncs, p.WALSyncFailures)
	}
	return line
}

// ms prints a duration to the millisecond, or "-" for zero.
func ms(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	if d < time.Millisecond {
		return "<1ms"
	}
	return d.Round(time.Millisecond).String()
}
