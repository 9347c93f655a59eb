package main

// What skipprd inspect reports: the JSON document --json prints, whose
// field names are stable (new fields may be added; none is renamed or
// removed), and which the text output prints too. Times are Unix
// milliseconds, sizes bytes, snapshot ids "{epoch:012}-{seq:012}".

import (
	"strings"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// inspectReport is the whole document.
type inspectReport struct {
	// ReadOnly is always true: inspect wrote nothing, claimed no writer
	// object and took no lock.
	ReadOnly   bool   `json:"read_only"`
	Pipeline   string `json:"pipeline"`
	WALStorage string `json:"wal_storage"` // disk, embedded or s3
	DataDir    string `json:"data_dir"`
	Store      string `json:"store"` // where the segments were read
	Root       string `json:"root"`  // the pipeline's key prefix in it
	// StoreMissing: the local or embedded store was never created, so
	// there was nothing to read in it.
	StoreMissing bool               `json:"store_missing"`
	Segments     []inspectSegment   `json:"segments"` // live, in commit order
	Offsets      inspectOffsets     `json:"offsets"`
	Keys         inspectKeys        `json:"idempotency_keys"`
	Log          *inspectLogSummary `json:"log"` // WAL_STORAGE=disk only; null otherwise
	Orphans      []inspectOrphan    `json:"orphans"`
	Uploads      []inspectUpload    `json:"uploads"` // multipart uploads in progress: dangling after a crash
	// Problems is damage found (a corrupt or missing object, a halted
	// log partition), a line each naming the object; with any, inspect
	// exits 1 after printing the rest.
	Problems []string `json:"problems"`
}

// inspectSegment is one live segment: its commit marker, with its
// completion bitmap.
type inspectSegment struct {
	ID            string          `json:"id"`
	Marker        string          `json:"marker"` // the commit marker's key
	CreatedUnixMs int64           `json:"created_unix_ms"`
	BodyBytes     int64           `json:"body_bytes"`
	WALID         string          `json:"wal_id"`   // "" in a marker older than WAL identities
	Pipeline      string          `json:"pipeline"` // the origin's pipeline, as the marker says
	Parts         []inspectPart   `json:"parts"`
	Applied       int             `json:"applied"` // parts whose bit is set
	Bitmap        string          `json:"bitmap"`  // a character per part, ordinal 0 first: 1 applied, 0 not
	BitmapObject  bool            `json:"bitmap_object"`
	Offsets       []inspectOffset `json:"offsets"` // the sources' progress it commits
	// IdempotencyKeys: how many idempotency keys it commits (its offsets
	// under engine.IdemOffsetPrefix, which the key store keeps later).
	IdempotencyKeys int          `json:"idempotency_keys"`
	Cuts            []inspectCut `json:"cuts"` // the compaction jobs this segment ends
}

// inspectPart is one PART of a segment: one slice.
type inspectPart struct {
	Ordinal      uint32 `json:"ordinal"`
	Sink         string `json:"sink"`
	Namespace    string `json:"namespace"`
	Partition    string `json:"partition"`
	Rows         int64  `json:"rows"`
	Bytes        int64  `json:"bytes"` // Arrow and CDC sidecar bytes in the body
	SidecarBytes int64  `json:"sidecar_bytes"`
	Applied      bool   `json:"applied"`
}

// inspectCut is a compaction job a segment's marker ends.
type inspectCut struct {
	Sink      string `json:"sink"`
	Namespace string `json:"namespace"`
	First     string `json:"first"` // the oldest segment holding its PARTs
	Segments  uint32 `json:"segments"`
	Parts     uint32 `json:"parts"`
	Reason    string `json:"reason"`
}

type inspectOffset struct {
	Key   string `json:"key"`
	Value uint64 `json:"value"`
}

// inspectOffsets are the committed source offsets (without the
// idempotency keys a segment's or an old checkpoint's offsets hold).
type inspectOffsets struct {
	CheckpointEpoch uint64          `json:"checkpoint_epoch"`
	Checkpoint      []inspectOffset `json:"checkpoint"` // the _offsets object as written
	// Committed is the checkpoint max-merged with every live segment's
	// offsets: where a restart resumes each source.
	Committed []inspectOffset `json:"committed"`
}

// inspectKeys is the idempotency-key store: its buckets' manifests.
type inspectKeys struct {
	Buckets       int   `json:"buckets"`
	Runs          int   `json:"runs"`
	Keys          int64 `json:"keys"`
	Bytes         int64 `json:"bytes"`          // of its objects, manifests and runs
	OldestUnixMs  int64 `json:"oldest_unix_ms"` // the least value (submit time) a run holds; 0 with none
	NewestUnixMs  int64 `json:"newest_unix_ms"` // the greatest
	WindowSeconds int64 `json:"window_seconds"` // how long a key is remembered
	BucketSeconds int64 `json:"bucket_seconds"` // the span of one bucket
	LegacyBuckets int   `json:"legacy_buckets"` // buckets still in the old checkpoint format
}

// inspectLogSummary is the disk log under DATA_DIR/wal.
type inspectLogSummary struct {
	Root string `json:"root"`
	// UnflushedUnits: acked units no flushed generation covers, which a
	// restart replays.
	UnflushedUnits int                   `json:"unflushed_units"`
	Partitions     []inspectLogPartition `json:"partitions"`
}

type inspectLogPartition struct {
	Partition uint32           `json:"partition"`
	Halted    string           `json:"halted"` // the damage recovery halts it on; "" if none
	Files     []inspectLogFile `json:"files"`
}

type inspectLogFile struct {
	Name     string   `json:"name"`
	Bytes    int64    `json:"bytes"`
	Torn     bool     `json:"torn"`
	Units    int      `json:"units"`
	FirstSeq uint64   `json:"first_seq"` // of its units; 0 with none
	LastSeq  uint64   `json:"last_seq"`
	Seals    []string `json:"seals"`   // generations sealed in it
	Flushed  []string `json:"flushed"` // generations recorded flushed in it
	// Dirty: the generations with entries here not yet flushed (what
	// keeps the file); Unsealed: its units no seal lists yet.
	Dirty    []string `json:"dirty"`
	Unsealed int      `json:"unsealed"`
}

// inspectOrphan is an object under the pipeline's root that no live
// segment accounts for.
type inspectOrphan struct {
	Key            string `json:"key"`
	Bytes          int64  `json:"bytes"`
	ModifiedUnixMs int64  `json:"modified_unix_ms"`
	Why            string `json:"why"`
}

type inspectUpload struct {
	Key             string `json:"key"`
	UploadID        string `json:"upload_id"`
	InitiatedUnixMs int64  `json:"initiated_unix_ms"`
}

// offsetsOf converts the sources' offsets of o for the report (never
// nil: an empty list), and counts the idempotency keys o holds besides.
func offsetsOf(o segment.Offsets) (sources []inspectOffset, keys int) {
	sources = make([]inspectOffset, 0, len(o))
	for _, e := range o {
		if strings.HasPrefix(e.Key, engine.IdemOffsetPrefix) {
			keys++
			continue
		}
		sources = append(sources, inspectOffset{e.Key, e.Value})
	}
	return sources, keys
}
