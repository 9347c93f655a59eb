package faults

// Kind is one kind of fault.
type Kind uint8

// Fault kinds. The values index rates, counters and schedules: append
// only. Names (kindNames) are what plans and seed files spell.
const (
	Crash             Kind = iota // SIGKILL of the engine at a step
	ListLag                       // new keys invisible / deleted keys lingering in LIST
	PutError                      // PutObject fails, no effect
	Ambiguous                     // a mutating request's outcome is unknown (applied or not)
	GetError                      // GetObject / HeadObject fail
	ListError                     // ListObjects / ListMultipartUploads fail
	DeleteError                   // DeleteObject fails
	Throttle                      // 503 SlowDown on any request
	LatencySpike                  // a request takes much longer
	MultipartPart                 // UploadPart fails (sometimes after applying)
	MultipartComplete             // CompleteMultipartUpload fails (sometimes after applying)
	MultipartAbort                // AbortMultipartUpload fails
	FsyncError                    // an fsync fails: the file is poisoned
	DiskWriteError                // a disk write fails (EIO)
	DiskFull                      // an allocating disk operation fails (ENOSPC)
	BitFlip                       // a bit flips on read or in the durable image
	SlowIO                        // a disk operation takes much longer
	SinkError                     // a sink apply fails, nothing applied
	SinkAmbiguous                 // a sink apply lands but reports failure
	SinkOutage                    // the sink is down for a window of time
	CrashPoint                    // SIGKILL right after a compaction or upload step
	MemoryHint                    // the memory available changes (the pool resizes)
	Restart                       // a graceful stop (Close), then a new process
	StoreOutage                   // every store request fails for a window of time
	AmbiguousMarker               // a commit marker PUT's outcome is unknown
	AmbiguousBitmap               // a completion bitmap PUT's outcome is unknown
	AmbiguousDelete               // a DELETE's outcome is unknown
	AmbiguousControl              // a writer-object or checkpoint PUT's outcome is unknown
	ReadTimeout                   // a GET, HEAD or LIST times out (no answer)
	CorruptRead                   // a GET returns flipped or truncated bytes
	CorruptAtRest                 // a committed segment's body or bitmap changes in the store
	Zombie                        // the engine pauses, a new one takes over, the old one resumes
	SourceRewind                  // a replayable source resumes from earlier offsets than recovered
	SinkRefuse                    // a sink says a job can never be applied (the lane halts)
	UploadLost                    // a multipart upload is aborted under its writer (a lifecycle rule)
	FsyncErrorKill                // SIGKILL right after a log fsync error, sparing the machine (its page cache)
	StoreRefused                  // every write is refused for good (403) for a window of time: credentials lost write access
	CommitPowerLoss               // the machine loses power right after a disk-WAL segment commit, before its flushed record is durable
	NumKinds
)

var kindNames = [NumKinds]string{
	"crash", "list-lag", "put-error", "ambiguous", "get-error", "list-error",
	"delete-error", "throttle", "latency-spike", "mpu-part", "mpu-complete", "mpu-abort",
	"fsync-error", "disk-write-error", "disk-full", "bit-flip", "slow-io",
	"sink-error", "sink-ambiguous", "sink-outage", "crash-point", "memory-hint",
	"restart", "store-outage", "ambiguous-marker", "ambiguous-bitmap", "ambiguous-delete",
	"ambiguous-control", "read-timeout", "corrupt-read", "corrupt-at-rest", "zombie",
	"source-rewind", "sink-refuse", "mpu-lost", "fsync-error-kill",
	"store-refused", "commit-power-loss",
}

func (k Kind) String() string {
	if k < NumKinds {
		return kindNames[k]
	}
	return "kind?"
}

// KindByName returns the kind called name.
func KindByName(name string) (Kind, bool) {
	for k, n := range kindNames {
		if n == name {
			return Kind(k), true
		}
	}
	return 0, false
}

// Needs says what a world must have for a kind to be able to fire at
// all. A plan drops the kinds its world cannot exercise, so a plan never
// prints a fault that cannot happen.
type Needs uint8

const (
	NeedsNothing    Needs = 0
	NeedsDisk       Needs = 1 << iota // a destination on the simulated disk
	NeedsSink                         // any destination (compaction runs)
	NeedsMultipart                    // bodies routinely larger than a part
	NeedsDiskRead                     // something reads back from the disk (a disk WAL)
	NeedsReplayable                   // a replayable source
)

var kindNeeds = [NumKinds]Needs{
	MultipartPart: NeedsMultipart, MultipartComplete: NeedsMultipart, MultipartAbort: NeedsMultipart, UploadLost: NeedsMultipart,
	FsyncError: NeedsDisk, DiskWriteError: NeedsDisk, DiskFull: NeedsDisk, SlowIO: NeedsDisk,
	BitFlip: NeedsDiskRead, FsyncErrorKill: NeedsDiskRead, CommitPowerLoss: NeedsDiskRead,
	SinkError: NeedsSink, SinkAmbiguous: NeedsSink, SinkOutage: NeedsSink, CorruptAtRest: NeedsSink,
	AmbiguousBitmap: NeedsSink, SinkRefuse: NeedsSink,
	SourceRewind: NeedsReplayable,
}

// World is what a world offers faults (Plan.Restrict).
type World struct {
	Disk, Sink, Multipart, DiskRead, Replayable bool
	// DiskWAL: the world runs the local-disk WAL (in some pipeline). A
	// local log has one writer by construction (production holds a lock
	// on it), so a zombie cannot exist there: Zombie is dropped, unless
	// another pipeline of the world runs the S3 WAL (S3WALToo).
	DiskWAL  bool
	S3WALToo bool
}

func (w World) has(n Needs) bool {
	have := NeedsNothing
	for _, c := range []struct {
		ok bool
		n  Needs
	}{{w.Disk, NeedsDisk}, {w.Sink, NeedsSink}, {w.Multipart, NeedsMultipart}, {w.DiskRead, NeedsDiskRead}, {w.Replayable, NeedsReplayable}} {
		if c.ok {
			have |= c.n
		}
	}
	return n&have == n
}
