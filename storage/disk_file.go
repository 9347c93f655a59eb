package storage

import (
	"fmt"
	"io"
	"os"
	"unsafe"

	"github.com/ncw/directio"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/recordpath"
)

// errMisaligned: Direct I/O with an offset or length that is not a
// multiple of engine.DirectAlign.
var errMisaligned = fmt.Errorf("storage: Direct I/O needs offsets and lengths in multiples of %d (engine.DirectAlign)", engine.DirectAlign)

// osFile is engine.File on an *os.File. Every call is a job on the file's
// serial queue; the job's completion is posted to the loop from inside
// the job, so completions reach the loop — and run — in call order.
//
// Buffers for Direct I/O should come from directio.AlignedBlock: with
// O_DIRECT in effect the kernel also needs the buffer's address aligned,
// and a misaligned buffer costs a copy through an aligned bounce buffer
// here (see ioBuffer). Offsets and lengths are the caller's to align; a
// misaligned one is refused with errMisaligned.
type osFile struct {
	loop *Loop
	path string // the port path, for errors
	f    *os.File
	// direct: O_DIRECT is in effect. aligned: the caller asked for Direct,
	// so offsets and lengths are checked even where the filesystem refused
	// O_DIRECT — code that passes on tmpfs must also pass on ext4.
	direct, aligned bool
	q               serialQueue

	closed bool // loop-only: Close was called

	// Job-only state (touched only by jobs on q, one at a time):
	end     int64 // INVARIANT: the file's size as far as this handle has made it
	syncErr error // the first failed Sync; every later Sync fails with it
}

var _ engine.File = (*osFile)(nil)

func newOSFile(l *Loop, path string, f *os.File, direct, aligned bool, size int64) *osFile {
	return &osFile{loop: l, path: path, f: f, direct: direct, aligned: aligned, end: size}
}

// enqueue queues job and posts done(job's error) when it has run.
// Calling a closed file is a programmer error, caught on the loop with
// the call that made it.
func (f *osFile) enqueue(op string, job func() error, done func(error)) {
	if f.closed {
		panic(fmt.Sprintf("storage: %s on closed file %s", op, f.path))
	}
	recordpath.Spine()
	f.q.submit(func() {
		err := job()
		f.loop.Post(func() { recordpath.Spine(); done(err) })
	})
}

// WriteAt implements engine.File. A write past the end extends the end
// that Append uses.
func (f *osFile) WriteAt(p []byte, off int64, done func(err error)) {
	f.enqueue("WriteAt", func() error { return f.writeAt("write", p, off) }, done)
}

// Append implements engine.File: a WriteAt at this handle's end of file.
func (f *osFile) Append(p []byte, done func(off int64, err error)) {
	var at int64
	f.enqueue("Append", func() error {
		at = f.end
		return f.writeAt("append", p, at)
	}, func(err error) { done(at, err) })
}

func (f *osFile) writeAt(op string, p []byte, off int64) error {
	if err := f.checkAlign(op, len(p), off); err != nil || len(p) == 0 {
		return err
	}
	buf, bounced := f.ioBuffer(p)
	if bounced {
		copy(buf, p)
	}
	n, err := f.f.WriteAt(buf, off)
	f.end = max(f.end, off+int64(n))
	if err != nil {
		return fmt.Errorf("storage: %s %s at %d: %w", op, f.path, off, err)
	}
	return nil
}

// ReadAt implements engine.File. Reaching the end of the file is not an
// error: n < len(p) says it.
func (f *osFile) ReadAt(p []byte, off int64, done func(n int, err error)) {
	var n int
	f.enqueue("ReadAt", func() (err error) {
		n, err = f.readAt(p, off)
		return err
	}, func(err error) { done(n, err) })
}

func (f *osFile) readAt(p []byte, off int64) (int, error) {
	if err := f.checkAlign("read", len(p), off); err != nil || len(p) == 0 {
		return 0, err
	}
	buf, bounced := f.ioBuffer(p)
	n, err := f.f.ReadAt(buf, off)
	if bounced {
		copy(p, buf[:n])
	}
	if err != nil && err != io.EOF {
		return n, fmt.Errorf("storage: read %s at %d: %w", f.path, off, err)
	}
	return n, nil
}

// checkAlign refuses misaligned Direct I/O before it reaches the kernel,
// whose answer would be a bare EINVAL.
func (f *osFile) checkAlign(op string, length int, off int64) error {
	if !f.aligned || (off%engine.DirectAlign == 0 && length%engine.DirectAlign == 0) {
		return nil
	}
	return fmt.Errorf("storage: %s %s: offset %d, length %d: %w", op, f.path, off, length, errMisaligned)
}

// ioBuffer returns p, or an aligned bounce buffer of p's length (bounced)
// when O_DIRECT is in effect and p's address is not aligned. The engine
// cannot allocate aligned memory itself (it imports only value packages
// of the standard library), so the port takes the copy rather than fail.
//
// REQUIRES: len(p) > 0.
func (f *osFile) ioBuffer(p []byte) (buf []byte, bounced bool) {
	if !f.direct || addressAligned(p) {
		return p, false
	}
	return directio.AlignedBlock(len(p)), true
}

// addressAligned reports whether p starts on a DirectAlign boundary.
func addressAligned(p []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(p)))%engine.DirectAlign == 0
}

// Sync implements engine.File with fdatasync. A failed Sync poisons the
// handle: after fsync fails, Linux may drop the dirty pages and report the
// next fsync as a success ("fsyncgate"), so every later Sync fails too,
// whether or not the caller obeys the contract's "do not retry".
func (f *osFile) Sync(done func(err error)) {
	f.enqueue("Sync", func() error {
		if f.syncErr != nil {
			return fmt.Errorf("storage: sync %s: an earlier sync failed: %w", f.path, f.syncErr)
		}
		if err := fdatasync(f.f); err != nil {
			f.syncErr = err
			return fmt.Errorf("storage: sync %s: %w", f.path, err)
		}
		return nil
	}, done)
}

// Truncate implements engine.File; the end moves to size.
func (f *osFile) Truncate(size int64, done func(err error)) {
	f.enqueue("Truncate", func() error {
		if err := f.f.Truncate(size); err != nil {
			return fmt.Errorf("storage: truncate %s to %d: %w", f.path, size, err)
		}
		f.end = size
		return nil
	}, done)
}

// Allocate implements engine.File: the file's blocks up to size are
// reserved (fallocate), so a later write inside them cannot fail for
// space and its fdatasync commits no block allocation. A file already
// at least size long is left as it is.
func (f *osFile) Allocate(size int64, done func(err error)) {
	f.enqueue("Allocate", func() error {
		if size <= f.end {
			return nil
		}
		if err := allocate(f.f, f.end, size, f.direct); err != nil {
			return fmt.Errorf("storage: allocate %s to %d bytes: %w", f.path, size, err)
		}
		f.end = size
		return nil
	}, done)
}

// Size implements engine.File from the filesystem, not from the tracked
// end, so it also sees what other handles did.
func (f *osFile) Size(done func(size int64, err error)) {
	var size int64
	f.enqueue("Size", func() error {
		st, err := f.f.Stat()
		if err != nil {
			return fmt.Errorf("storage: stat %s: %w", f.path, err)
		}
		size = st.Size()
		return nil
	}, func(err error) { done(size, err) })
}

// Close implements engine.File. Calls queued before it still run first.
func (f *osFile) Close(done func(err error)) {
	f.enqueue("Close", func() error {
		if err := f.f.Close(); err != nil {
			return fmt.Errorf("storage: close %s: %w", f.path, err)
		}
		return nil
	}, done)
	f.closed = true
}

// Direct implements engine.File.
func (f *osFile) Direct() bool { return f.direct }
