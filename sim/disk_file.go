package sim

import (
	"bytes"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// node is one file's contents (an inode): possibly linked at several
// moments under different paths, possibly unlinked but still open.
type node struct {
	// data is what reads see: every completed write applied in order.
	data []byte
	// durableImg is what survives a crash for sure.
	durableImg []byte
	// unsynced are the writes completed since durableImg last advanced, in
	// completion order. INVARIANT: without bit flips, data equals
	// durableImg with unsynced applied in order.
	unsynced []fileWrite
	// poisoned is set when a Sync failed. From then on Sync reports
	// success but makes nothing durable (Linux after an fsync error marks
	// the dirty pages clean: a retried fsync "succeeds" while the data is
	// gone), so an engine that retries fsync loses data in the simulator.
	// INVARIANT: once true, stays true until a crash replaces the node.
	poisoned bool
	// linked is true while some path in the live namespace names the node;
	// only linked nodes count against the disk's capacity.
	linked bool
	// shared is set when data and durableImg are one slice (a file as a
	// crash left it: what reads see is what is durable). The first change
	// to either copies data (own): most files a crash keeps are never
	// written again, and copying every one at every crash was a sixth
	// of a long run's time.
	shared bool
}

// own gives data a backing array of its own before data or durableImg
// is changed.
func (n *node) own() {
	if n.shared {
		n.data = bytes.Clone(n.data)
		n.shared = false
	}
}

// fileWrite is one completed write or truncate, kept for the crash model.
type fileWrite struct {
	off int64
	// buf is a copy of the bytes written; nil for a truncate to off.
	buf      []byte
	truncate bool
}

// apply performs w on b and returns the result.
func (w fileWrite) apply(b []byte) []byte {
	if w.truncate {
		return resize(b, w.off)
	}
	end := w.off + int64(len(w.buf))
	if end > int64(len(b)) {
		b = resize(b, end)
	}
	copy(b[w.off:], w.buf)
	return b
}

// resize returns b with length n, zero-filling any growth.
func resize(b []byte, n int64) []byte {
	if n <= int64(len(b)) {
		return b[:n]
	}
	if n <= int64(cap(b)) {
		old := len(b)
		b = b[:n]
		clear(b[old:])
		return b
	}
	grown := make([]byte, n, max(n, 2*int64(cap(b))))
	copy(grown, b)
	return grown
}

// fileHandle is one open File of one incarnation.
type fileHandle struct {
	d    *Disk
	inc  *Incarnation
	node *node
	path string
	// writable and direct are fixed at Open.
	writable, direct bool
	// closed is set when Close completes; every later call fails.
	closed bool
	// lastAt is the completion time of the latest call issued; the next
	// call completes strictly later (same-instant events run in a seeded
	// order, not FIFO). INVARIANT: calls complete in issue order.
	lastAt time.Duration
}

// Open implements engine.Disk.
func (c *diskClient) Open(p string, mode engine.OpenMode, done func(f engine.File, err error)) {
	cp, perr := cleanPath(p)
	var f *fileHandle
	c.d.submit(c.inc, DiskOpen, cp, 0, 0, func(o DiskOutcome) error {
		if err := firstErr(perr, c.d.checkParent(cp)); err != nil {
			return err
		}
		n, err := c.d.open(cp, mode.Create, o)
		if err == nil {
			f = &fileHandle{d: c.d, inc: c.inc, node: n, path: cp, writable: mode.Write,
				direct: mode.Direct && !c.d.cfg.DirectUnsupported}
		}
		return err
	}, func(err error) {
		if err != nil {
			done(nil, err)
			return
		}
		done(f, nil)
	})
}

// open finds or creates the node at p.
func (d *Disk) open(p string, create bool, o DiskOutcome) (*node, error) {
	n := d.files[p]
	_, isDir := d.dirs[p]
	switch {
	case create && (n != nil || isDir):
		return nil, engine.ErrExists
	case !create && isDir:
		return nil, ErrIsDir
	case !create && n == nil:
		return nil, engine.ErrNotFound
	case o == DiskIOError:
		return nil, ErrIO
	case create && o == DiskNoSpace:
		return nil, ErrNoSpace
	case !create:
		return n, nil
	}
	n = &node{}
	d.link(p, n)
	d.logOp(&dirOp{kind: dirCreate, path: p, node: n})
	return n, nil
}

// Direct implements engine.File.
func (f *fileHandle) Direct() bool { return f.direct }

// call issues one call on the file, after every earlier one.
func (f *fileHandle) call(op DiskOp, bytes int, apply func(o DiskOutcome) error, deliver func(err error)) {
	at := f.d.submit(f.inc, op, f.path, bytes, f.lastAt+1, func(o DiskOutcome) error {
		if f.closed {
			return ErrFileClosed
		}
		return apply(o)
	}, deliver)
	f.lastAt = max(f.lastAt, at)
}

// WriteAt implements engine.File. p is read at completion (it is borrowed
// until done), so an engine that reuses the buffer early writes garbage
// here, deterministically.
func (f *fileHandle) WriteAt(p []byte, off int64, done func(err error)) {
	mustNotBeNegative("WriteAt", off)
	f.call(DiskWrite, len(p), func(o DiskOutcome) error {
		err := f.write(p, off, false, o)
		if err == nil && f.d.OnWrite != nil {
			f.d.OnWrite(f.path)
		}
		return err
	}, done)
}

// Append implements engine.File.
func (f *fileHandle) Append(p []byte, done func(off int64, err error)) {
	var off int64
	f.call(DiskWrite, len(p), func(o DiskOutcome) error {
		off = int64(len(f.node.data))
		return f.write(p, off, true, o)
	}, func(err error) {
		if err != nil {
			off = 0
		}
		done(off, err)
	})
}

// write applies one write at completion time.
func (f *fileHandle) write(p []byte, off int64, appending bool, o DiskOutcome) error {
	n, d := f.node, f.d
	growth := max(0, off+int64(len(p))-int64(len(n.data)))
	switch {
	case !f.writable:
		return ErrReadOnly
	case f.direct && (off%engine.DirectAlign != 0 || len(p)%engine.DirectAlign != 0):
		return ErrMisaligned
	case o == DiskIOError:
		return ErrIO
	case o == DiskNoSpace && growth > 0, n.linked && d.cfg.CapacityBytes > 0 && d.used+growth > d.cfg.CapacityBytes:
		return ErrNoSpace
	}
	w := fileWrite{off: off, buf: append([]byte(nil), p...)}
	n.own()
	n.data = w.apply(n.data)
	n.unsynced = append(n.unsynced, w)
	if n.linked {
		d.used += growth
	}
	d.counts.BytesWritten += uint64(len(p))
	return nil
}

// ReadAt implements engine.File. p is filled at completion.
func (f *fileHandle) ReadAt(p []byte, off int64, done func(n int, err error)) {
	mustNotBeNegative("ReadAt", off)
	var n int
	f.call(DiskRead, len(p), func(o DiskOutcome) error {
		switch {
		case f.direct && (off%engine.DirectAlign != 0 || len(p)%engine.DirectAlign != 0):
			return ErrMisaligned
		case o == DiskIOError:
			return ErrIO
		}
		if off < int64(len(f.node.data)) {
			n = copy(p, f.node.data[off:])
		}
		if o == DiskBitFlip && n > 0 {
			flipBit(p[:n], f.d.flipRand)
		}
		return nil
	}, func(err error) {
		if err != nil {
			n = 0
		}
		done(n, err)
	})
}

// Sync implements engine.File: every write completed by the time the sync
// completes becomes durable (writes issued earlier on this File always are,
// since calls complete in order).
func (f *fileHandle) Sync(done func(err error)) {
	f.call(DiskSync, 0, func(o DiskOutcome) error {
		n := f.node
		switch {
		case o == DiskIOError:
			n.poisoned = true
			if f.d.OnSyncError != nil {
				f.d.OnSyncError(f.path)
			}
			return ErrIO
		case n.poisoned:
			f.d.counts.SyncsIgnored++
			return nil
		}
		n.own()
		lo, hi := n.syncRange()
		for _, w := range n.unsynced {
			n.durableImg = w.apply(n.durableImg)
		}
		clear(n.unsynced) // drop the copies of synced bytes
		n.unsynced = n.unsynced[:0]
		if hi = min(hi, int64(len(n.durableImg))); o == DiskBitFlip && hi > lo {
			flipBit(n.durableImg[lo:hi], f.d.flipRand)
		}
		if f.d.OnSync != nil {
			f.d.OnSync(f.path, n.data)
		}
		return nil
	}, done)
}

// syncRange returns the byte range the unsynced writes cover.
func (n *node) syncRange() (lo, hi int64) {
	lo = int64(len(n.data))
	for _, w := range n.unsynced {
		if !w.truncate {
			lo = min(lo, w.off)
			hi = max(hi, w.off+int64(len(w.buf)))
		}
	}
	return lo, hi
}

// Truncate implements engine.File.
func (f *fileHandle) Truncate(size int64, done func(err error)) {
	mustNotBeNegative("Truncate", size)
	f.call(DiskTruncate, 0, func(o DiskOutcome) error { return f.resize(o, size) }, done)
}

// Allocate implements engine.File: a growing truncate, which is what
// the disk models anyway (a file's bytes are its blocks: no write
// inside the size ever runs out of space); a file at least size long
// is left as it is.
func (f *fileHandle) Allocate(size int64, done func(err error)) {
	mustNotBeNegative("Allocate", size)
	f.call(DiskAllocate, 0, func(o DiskOutcome) error {
		if size <= int64(len(f.node.data)) && f.writable && o != DiskIOError {
			return nil
		}
		return f.resize(o, size)
	}, done)
}

// resize sets the file's size at completion time, with outcome o.
func (f *fileHandle) resize(o DiskOutcome, size int64) error {
	n, d := f.node, f.d
	growth := max(0, size-int64(len(n.data)))
	switch {
	case !f.writable:
		return ErrReadOnly
	case o == DiskIOError:
		return ErrIO
	case o == DiskNoSpace && growth > 0, n.linked && d.cfg.CapacityBytes > 0 && d.used+growth > d.cfg.CapacityBytes:
		return ErrNoSpace
	}
	if n.linked {
		d.used += size - int64(len(n.data))
	}
	w := fileWrite{off: size, truncate: true}
	n.own()
	n.data = w.apply(n.data)
	n.unsynced = append(n.unsynced, w)
	return nil
}

// Size implements engine.File.
func (f *fileHandle) Size(done func(size int64, err error)) {
	var size int64
	f.call(DiskSize, 0, func(o DiskOutcome) error {
		if o == DiskIOError {
			return ErrIO
		}
		size = int64(len(f.node.data))
		return nil
	}, func(err error) { done(size, err) })
}

// Close implements engine.File. Closing does not sync.
func (f *fileHandle) Close(done func(err error)) {
	f.call(DiskClose, 0, func(DiskOutcome) error {
		f.closed = true
		return nil
	}, done)
}

// flipBit flips one seeded bit of b.
// REQUIRES: len(b) > 0.
func flipBit(b []byte, r *Rand) {
	i := r.Uint64n(uint64(len(b)) * 8)
	b[i/8] ^= 1 << (i % 8)
}

func mustNotBeNegative(what string, v int64) {
	if v < 0 {
		panic("sim: File." + what + " with a negative offset or size")
	}
}
