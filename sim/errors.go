package sim

import "errors"

// Errors the models return besides the engine's sentinels. Each is a
// definite failure (not engine.ErrAmbiguous): the request had no effect.
var (
	// ErrInjected: the store's fault injector failed the request (a 500
	// before the request was processed).
	ErrInjected = errors.New("sim: injected failure")
	// ErrInvalidPart: CompleteMultipartUpload named a part that was not
	// uploaded, with a different ETag, out of order, or too small (S3
	// InvalidPart / InvalidPartOrder / EntityTooSmall).
	ErrInvalidPart = errors.New("sim: invalid part")
	// ErrInvalidRange: a GetObject range that is empty or starts at or
	// past the end of the object (S3 416 InvalidRange).
	ErrInvalidRange = errors.New("sim: invalid range")

	// ErrIO: a disk operation failed (EIO). After a failed Sync the file is
	// poisoned; see Disk.
	ErrIO = errors.New("sim: input/output error")
	// ErrNoSpace: the disk is full (ENOSPC); the write had no effect.
	ErrNoSpace = errors.New("sim: no space left on device")
	// ErrNotDir: a path component is not a directory, or ReadDir/SyncDir
	// named a file.
	ErrNotDir = errors.New("sim: not a directory")
	// ErrIsDir: a file operation named a directory.
	ErrIsDir = errors.New("sim: is a directory")
	// ErrNotEmpty: Remove of a directory that still has entries.
	ErrNotEmpty = errors.New("sim: directory not empty")
	// ErrBadPath: an absolute path, or one escaping the disk root.
	ErrBadPath = errors.New("sim: bad path")
	// ErrFileClosed: an operation on a closed File.
	ErrFileClosed = errors.New("sim: file already closed")
	// ErrReadOnly: a write to a File opened without Write.
	ErrReadOnly = errors.New("sim: file not open for writing")
	// ErrMisaligned: an O_DIRECT transfer whose offset or length is not a
	// multiple of engine.DirectAlign (EINVAL).
	ErrMisaligned = errors.New("sim: misaligned direct I/O")
)
