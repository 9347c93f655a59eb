package sim

import (
	"path"
	"slices"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// Disk is the world's local filesystem: an in-memory model that keeps, for
// every file, what has been written and what is durable separately, and
// for every directory, which entry changes are durable — so that Crash can
// produce any state a real machine could come back with (after Pebble's
// MemFS crash clones and TigerBeetle's simulated storage).
//
// Data: each file (an inode, "node") holds its current bytes, its durable
// image, and the writes completed since the image last advanced, in order.
// A successful Sync applies those writes to the durable image.
//
// Entries: every create, remove, rename and mkdir is logged in its parent
// directory (a rename across directories in both). SyncDir makes the
// directory's logged operations durable. Each path's durable state is that
// of the latest (by issue order) durable operation on it, so operations of
// different directories made durable in any order compose correctly.
//
// Crash semantics are in disk_crash.go. Operations complete after a seeded
// latency as events owned by the calling incarnation: an operation still in
// flight when its process dies never takes effect. Calls on one File
// complete in the order they were made.
type Disk struct {
	sched *Scheduler
	trace *Trace
	cfg   DiskConfig
	// Independent streams for latencies, fault decisions and bit-flip
	// positions, so that one never perturbs the others.
	latRand, faultRand, flipRand *Rand

	// files is the live namespace: path → node.
	files map[string]*node
	// dirs is the live directory tree: dir path → names of its children
	// (files and subdirectories). "" is the root and always present.
	// INVARIANT: a path is in files or in dirs (not both) iff its name is
	// in its parent's children.
	dirs map[string]map[string]struct{}
	// durable is each path's latest durable directory-entry state.
	durable map[string]durableEntry
	// dirLog holds, per directory, the entry operations not yet durable,
	// in issue order.
	dirLog map[string][]*dirOp
	// opSeq orders directory operations. INVARIANT: > every logged seq.
	opSeq uint64
	// used is the sum of the sizes of linked files, for CapacityBytes.
	used    int64
	clients []*diskClient
	counts  DiskCounts
	// OnSync, if set, sees every file a successful, unpoisoned Sync made
	// durable, with what had been written to it (an oracle's view of
	// "covered by a completed fsync").
	OnSync func(path string, written []byte)
	// OnSyncError, if set, sees every Sync that failed (ErrIO): the file
	// is poisoned, its unsynced bytes readable but never to be durable.
	OnSyncError func(path string)
	// OnWrite, if set, sees every WriteAt that took effect (a window
	// between a write and its sync).
	OnWrite func(path string)
}

// DiskConfig tunes the disk model. The zero value is usable.
type DiskConfig struct {
	// Latency per operation; a zero entry takes DefaultDiskLatency's.
	Latency [NumDiskOps]Latency
	// CapacityBytes is the most file bytes the disk holds; writes beyond it
	// fail with ErrNoSpace. 0 means unlimited.
	CapacityBytes int64
	// DirectUnsupported makes Open refuse O_DIRECT silently, so files fall
	// back to buffered I/O (File.Direct reports false), as on tmpfs.
	DirectUnsupported bool
	// Faults decides each operation's outcome; nil means no faults.
	Faults DiskFaults
}

// DefaultDiskLatency is a plausible local NVMe profile.
var DefaultDiskLatency = [NumDiskOps]Latency{
	DiskOpen:     {Base: 20 * time.Microsecond, Tail: 10 * time.Microsecond},
	DiskRename:   {Base: 30 * time.Microsecond, Tail: 20 * time.Microsecond},
	DiskRemove:   {Base: 30 * time.Microsecond, Tail: 20 * time.Microsecond},
	DiskReadDir:  {Base: 30 * time.Microsecond, Tail: 20 * time.Microsecond},
	DiskSyncDir:  {Base: 300 * time.Microsecond, Tail: 400 * time.Microsecond},
	DiskMkdirAll: {Base: 30 * time.Microsecond, Tail: 20 * time.Microsecond},
	DiskWrite:    {Base: 10 * time.Microsecond, Tail: 10 * time.Microsecond, PerMiB: time.Millisecond},
	DiskRead:     {Base: 20 * time.Microsecond, Tail: 20 * time.Microsecond, PerMiB: 500 * time.Microsecond},
	DiskSync:     {Base: 300 * time.Microsecond, Tail: 600 * time.Microsecond},
	DiskTruncate: {Base: 20 * time.Microsecond, Tail: 10 * time.Microsecond},
	DiskSize:     {Base: 5 * time.Microsecond},
	DiskClose:    {Base: 5 * time.Microsecond},
	DiskAllocate: {Base: 50 * time.Microsecond, Tail: 50 * time.Microsecond},
}

// DiskCounts are the disk's counters, including coverage probes for the
// rare paths of the crash model.
type DiskCounts struct {
	Issued    [NumDiskOps]uint64 // operations accepted from a live incarnation
	Discarded [NumDiskOps]uint64 // operations from a dead incarnation
	Failed    [NumDiskOps]uint64 // operations that completed with an error
	// Outcomes counts the injector's decisions, by DiskOutcome.
	Outcomes     [numDiskOutcomes]uint64
	BytesWritten uint64
	// SyncsIgnored counts Syncs on a poisoned file: reported as success,
	// made nothing durable.
	SyncsIgnored uint64
	Crashes      uint64
	// Per crash, unsynced file writes kept whole, kept torn, or lost, and
	// non-durable directory operations kept or lost.
	WritesKept, WritesTorn, WritesLost uint64
	DirOpsKept, DirOpsLost             uint64
}

// NewDisk returns an empty disk (just the root directory) on s.
func NewDisk(s *Scheduler, r *Rand, cfg DiskConfig) *Disk {
	for op := range NumDiskOps {
		if cfg.Latency[op] == (Latency{}) {
			cfg.Latency[op] = DefaultDiskLatency[op]
		}
	}
	return &Disk{
		sched: s, trace: s.trace, cfg: cfg,
		latRand: r.Split("latency"), faultRand: r.Split("faults"), flipRand: r.Split("flips"),
		files:   make(map[string]*node),
		dirs:    map[string]map[string]struct{}{"": {}},
		durable: make(map[string]durableEntry),
		dirLog:  make(map[string][]*dirOp),
	}
}

// Client returns the disk port of one incarnation.
func (d *Disk) Client(inc *Incarnation) engine.Disk {
	if inc.sched != d.sched {
		panic("sim: Disk.Client: incarnation of another scheduler")
	}
	c := &diskClient{d: d, inc: inc}
	d.clients = append(d.clients, c)
	return c
}

// SetFaults replaces the fault injector (nil: none).
func (d *Disk) SetFaults(f DiskFaults) { d.cfg.Faults = f }

// Counts returns the disk's counters.
func (d *Disk) Counts() DiskCounts { return d.counts }

// File returns the bytes written to the file at path (what a read sees)
// and its durable image (what a crash would keep at least). Both are the
// disk's own slices: do not modify or keep them across events. Both are
// nil if no file is at path.
func (d *Disk) File(p string) (written, durable []byte) {
	n := d.files[p]
	if n == nil {
		return nil, nil
	}
	return n.data, n.durableImg
}

// FlipBit flips one bit of the file at path, in what reads see and in
// its durable image where it holds that byte: media corruption at a
// place a test chooses (the fault injector's bit flips are seeded). It
// reports whether the file had that byte.
func (d *Disk) FlipBit(p string, off int64, bit uint) bool {
	n := d.files[p]
	if n == nil || off < 0 || off >= int64(len(n.data)) {
		return false
	}
	n.own()
	n.data[off] ^= 1 << (bit % 8)
	if off < int64(len(n.durableImg)) {
		n.durableImg[off] ^= 1 << (bit % 8)
	}
	return true
}

// Exists reports whether a file or directory is at path (live namespace).
func (d *Disk) Exists(p string) bool {
	_, isDir := d.dirs[p]
	return isDir || d.files[p] != nil
}

// EntryDurable reports whether path's current entry would survive a crash:
// its latest create/rename-to/mkdir is durable and no later operation on
// the path is pending.
func (d *Disk) EntryDurable(p string) bool {
	e, ok := d.durable[p]
	return ok && e.exists && !d.pendingOn(p)
}

// Paths returns every file path in the live namespace, sorted.
func (d *Disk) Paths() []string {
	out := make([]string, 0, len(d.files))
	for p := range d.files {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// diskClient is one incarnation's engine.Disk.
type diskClient struct {
	d   *Disk
	inc *Incarnation
}

// DiskError is every error the disk delivers: the operation and path,
// wrapping the sentinel (errors.Is).
type DiskError struct {
	Op   DiskOp
	Path string
	Err  error
}

func (e *DiskError) Error() string {
	return "sim disk " + e.Op.String() + " " + e.Path + ": " + e.Err.Error()
}
func (e *DiskError) Unwrap() error { return e.Err }

// submit issues one operation and returns its completion time (0 if the
// incarnation is dead and the operation was discarded). apply runs at
// completion with the injector's outcome, performs the effect and returns
// its error; deliver hands the error to the engine. notBefore orders the
// calls of one File: the completion is never earlier.
func (d *Disk) submit(inc *Incarnation, op DiskOp, p string, bytes int, notBefore time.Duration,
	apply func(o DiskOutcome) error, deliver func(err error)) time.Duration {
	if !inc.alive {
		d.counts.Discarded[op]++
		return 0
	}
	outcome, extra := d.decide(op, p)
	at := max(d.sched.now+d.cfg.Latency[op].Sample(d.latRand, bytes)+extra, notBefore)
	d.counts.Issued[op]++
	d.trace.Begin(d.sched.now, KindDiskIssue).U("inc", inc.id).U("op", uint64(op)).S("path", p).
		I("bytes", int64(bytes)).U("outcome", uint64(outcome)).I("at", int64(at)).End()
	inc.At(at, func() {
		err := apply(outcome)
		d.trace.Begin(d.sched.now, KindDiskDone).U("inc", inc.id).U("op", uint64(op)).S("path", p).
			U("err", diskErrCode(err)).End()
		if err != nil {
			d.counts.Failed[op]++
			err = &DiskError{Op: op, Path: p, Err: err}
		}
		deliver(err)
	})
	return at
}

func (d *Disk) decide(op DiskOp, p string) (DiskOutcome, time.Duration) {
	if d.cfg.Faults == nil {
		return DiskOK, 0
	}
	o, extra := d.cfg.Faults.Decide(op, p, d.faultRand)
	if o >= numDiskOutcomes || extra < 0 {
		panic("sim: DiskFaults returned an invalid outcome or a negative latency")
	}
	d.counts.Outcomes[o]++
	return o, extra
}

// cleanPath normalizes a slash-separated relative path; the root is "".
func cleanPath(p string) (string, error) {
	c := path.Clean(p)
	if c == "." {
		return "", nil
	}
	if strings.HasPrefix(c, "/") || c == ".." || strings.HasPrefix(c, "../") {
		return "", ErrBadPath
	}
	return c, nil
}

// parentDir returns the directory holding p ("" for the root's children).
func parentDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// baseName returns the last element of p.
func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// diskErrCode is a stable small number per error for the trace hash.
func diskErrCode(err error) uint64 {
	for i, e := range diskErrs {
		if err == e {
			return uint64(i + 1)
		}
	}
	if err == nil {
		return 0
	}
	return 255
}

// diskErrs are the errors the disk model returns, in trace-code order.
// Append only: the codes are part of every recorded hash.
var diskErrs = [...]error{ErrIO, ErrNoSpace, engine.ErrNotFound, engine.ErrExists, ErrNotDir,
	ErrIsDir, ErrNotEmpty, ErrBadPath, ErrFileClosed, ErrReadOnly, ErrMisaligned}
