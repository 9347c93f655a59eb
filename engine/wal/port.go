package wal

import (
	"errors"
	"time"
)

// The ports the log runs on. Package engine re-exports them (engine.Disk,
// engine.File, engine.OpenMode, engine.DirectAlign, engine.ErrNotFound,
// engine.ErrExists): production implements them over OS files
// (storage), the simulator over its disk model (sim).

// The Disk port's errors. Ports wrap these so callers can branch on
// errors.Is; the object store port reports a missing key with ErrNotFound
// too.
var (
	// ErrNotFound: no such key (or file).
	ErrNotFound = errors.New("not found")
	// ErrExists: Disk.Open with Create found the path already present.
	ErrExists = errors.New("already exists")
)

// Timers is what the log needs of the engine's timers: AfterFunc runs fn
// on the loop once d has elapsed; cancel stops it.
type Timers interface {
	AfterFunc(d time.Duration, fn func()) (cancel func())
}

// Disk is a local filesystem. Paths are slash-separated and relative to
// the disk's root.
//
// Durability: bytes written to a File are durable once a later Sync on
// that File has completed without error. A created, renamed or removed
// directory entry is durable once a later SyncDir of its directory has
// completed without error. A crash keeps every durable byte and entry and
// may keep any subset of the rest (including a torn prefix of the last
// write). After Sync fails, what the file holds on disk is unknown: the
// caller must not retry Sync on that File and must treat its unsynced
// writes as lost or torn.
type Disk interface {
	// Open opens path. Create makes a new file and fails if it exists.
	Open(path string, mode OpenMode, done func(f File, err error))
	Rename(from, to string, done func(err error))
	Remove(path string, done func(err error))
	// ReadDir lists the names in dir in ascending order.
	ReadDir(dir string, done func(names []string, err error))
	SyncDir(dir string, done func(err error))
	MkdirAll(dir string, done func(err error))
}

// OpenMode says how Disk.Open opens a file.
type OpenMode struct {
	Create bool // create a new file (fail if it exists); else open an existing one
	Write  bool // open for writing as well as reading
	// Direct asks for O_DIRECT: offsets, lengths and buffers of every
	// WriteAt and ReadAt must be multiples of DirectAlign. Where the
	// filesystem refuses O_DIRECT the port falls back to buffered I/O
	// (File.Direct reports which).
	Direct bool
}

// DirectAlign is the alignment O_DIRECT I/O requires.
const DirectAlign = 4096

// File is an open file. Calls on one File complete in the order they were
// made.
type File interface {
	WriteAt(p []byte, off int64, done func(err error))
	// Append writes p at the current end of the file and reports where.
	Append(p []byte, done func(off int64, err error))
	// ReadAt reads len(p) bytes at off; n < len(p) only at end of file.
	ReadAt(p []byte, off int64, done func(n int, err error))
	// Sync makes every completed write durable (fdatasync).
	Sync(done func(err error))
	Truncate(size int64, done func(err error))
	// Allocate grows the file to size with its blocks reserved (zeros):
	// a write inside them cannot fail for space, and syncing it commits
	// no block allocation. A file at least size long is left as it is.
	Allocate(size int64, done func(err error))
	Size(done func(size int64, err error))
	Close(done func(err error))
	// Direct reports whether the file is open with O_DIRECT.
	Direct() bool
}
