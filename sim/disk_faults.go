package sim

import "time"

// DiskOp is one kind of disk operation (engine.Disk and engine.File).
type DiskOp uint8

// Disk operations. The values index counters and latencies and are hashed
// into the trace: append only.
const (
	DiskOpen DiskOp = iota
	DiskRename
	DiskRemove
	DiskReadDir
	DiskSyncDir
	DiskMkdirAll
	DiskWrite // File.WriteAt and File.Append
	DiskRead
	DiskSync
	DiskTruncate
	DiskSize
	DiskClose
	DiskAllocate
	NumDiskOps
)

var diskOpNames = [NumDiskOps]string{
	DiskOpen: "open", DiskRename: "rename", DiskRemove: "remove", DiskReadDir: "readdir",
	DiskSyncDir: "syncdir", DiskMkdirAll: "mkdirall", DiskWrite: "write", DiskRead: "read",
	DiskSync: "sync", DiskTruncate: "truncate", DiskSize: "size", DiskClose: "close",
	DiskAllocate: "allocate",
}

// String returns the operation's name.
func (op DiskOp) String() string {
	if op < NumDiskOps {
		return diskOpNames[op]
	}
	return "diskop?"
}

// DiskOutcome is what the fault injector decides for one disk operation.
type DiskOutcome uint8

const (
	// DiskOK: the operation proceeds normally.
	DiskOK DiskOutcome = iota
	// DiskIOError: the operation fails with ErrIO and has no effect. On
	// Sync it is an fsync error: nothing becomes durable and the file is
	// poisoned (see Disk).
	DiskIOError
	// DiskNoSpace: an operation that allocates (write, append, growing
	// truncate, allocate, create, mkdir) fails with ErrNoSpace and has no effect;
	// for other operations it is ignored.
	DiskNoSpace
	// DiskBitFlip: on ReadAt, one bit of the returned bytes is flipped
	// (the stored data is intact); on Sync, the sync succeeds but one bit
	// of the bytes it made durable is flipped in the durable image (latent
	// media corruption, seen after the next crash). Ignored elsewhere.
	// The engine must detect both by checksum.
	DiskBitFlip
	numDiskOutcomes
)

var diskOutcomeNames = [numDiskOutcomes]string{"ok", "io-error", "no-space", "bit-flip"}

// String returns the outcome's name.
func (o DiskOutcome) String() string {
	if o < numDiskOutcomes {
		return diskOutcomeNames[o]
	}
	return "diskoutcome?"
}

// DiskFaults decides the fate of each disk operation, once, when it is
// issued, with the disk's own fault stream r; the outcome takes effect at
// completion and extraLatency models slow I/O.
type DiskFaults interface {
	Decide(op DiskOp, path string, r *Rand) (outcome DiskOutcome, extraLatency time.Duration)
}

// DiskFaultsFunc adapts a function to DiskFaults.
type DiskFaultsFunc func(op DiskOp, path string, r *Rand) (DiskOutcome, time.Duration)

// Decide calls f.
func (f DiskFaultsFunc) Decide(op DiskOp, path string, r *Rand) (DiskOutcome, time.Duration) {
	return f(op, path, r)
}
