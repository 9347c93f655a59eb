package sim

import (
	"slices"

	"github.com/skipprd/skipprd/engine"
)

// dirOpKind is a directory-entry operation.
type dirOpKind uint8

const (
	dirCreate dirOpKind = iota // a new file at path
	dirMkdir                   // a new directory at path
	dirRemove                  // path removed (file or empty directory)
	dirRename                  // the file at path moved to to
)

// dirOp is one directory-entry change waiting to become durable.
type dirOp struct {
	kind dirOpKind
	// seq is the order the operation took effect in the live namespace.
	seq      uint64
	path, to string
	// node is the file created or renamed; nil for directories.
	node *node
	// durable is set once the op is applied to Disk.durable. A rename
	// across directories sits in both logs; whichever SyncDir (or crash)
	// reaches it first applies it, atomically.
	// INVARIANT: once true, stays true.
	durable bool
}

// durableEntry is a path's state as of its latest durable operation.
type durableEntry struct {
	seq    uint64
	exists bool
	// node is the file at the path; nil for a directory (or !exists).
	node *node
}

// logOp records an operation that just took effect in the live namespace
// in the log of every directory it touches.
func (d *Disk) logOp(op *dirOp) {
	op.seq = d.opSeq
	d.opSeq++
	dir := parentDir(op.path)
	d.dirLog[dir] = append(d.dirLog[dir], op)
	if op.kind == dirRename {
		if to := parentDir(op.to); to != dir {
			d.dirLog[to] = append(d.dirLog[to], op)
		}
	}
}

// makeDurable applies op to the durable entries. Each path keeps the
// state of its latest (highest seq) durable operation, so applying ops of
// different directories in any order gives the same result.
func (d *Disk) makeDurable(op *dirOp) {
	if op.durable {
		return
	}
	op.durable = true
	switch op.kind {
	case dirCreate:
		d.setDurable(op.path, op.seq, true, op.node)
	case dirMkdir:
		d.setDurable(op.path, op.seq, true, nil)
	case dirRemove:
		d.setDurable(op.path, op.seq, false, nil)
	case dirRename:
		d.setDurable(op.path, op.seq, false, nil)
		d.setDurable(op.to, op.seq, true, op.node)
	}
}

func (d *Disk) setDurable(p string, seq uint64, exists bool, n *node) {
	if cur, ok := d.durable[p]; ok && cur.seq > seq {
		return
	}
	d.durable[p] = durableEntry{seq: seq, exists: exists, node: n}
}

// syncDir makes durable every op logged in dir with seq < upTo.
func (d *Disk) syncDir(dir string, upTo uint64) {
	log := d.dirLog[dir]
	i := 0
	for ; i < len(log) && log[i].seq < upTo; i++ {
		d.makeDurable(log[i])
	}
	if i == len(log) {
		delete(d.dirLog, dir)
		return
	}
	d.dirLog[dir] = slices.Delete(log, 0, i)
}

// pendingOn reports whether a non-durable op touches p.
func (d *Disk) pendingOn(p string) bool {
	for _, op := range d.dirLog[parentDir(p)] {
		if !op.durable && (op.path == p || op.to == p) {
			return true
		}
	}
	return false
}

// link puts n (nil: a directory) at p in the live namespace.
// REQUIRES: p's parent exists and p does not.
func (d *Disk) link(p string, n *node) {
	d.dirs[parentDir(p)][baseName(p)] = struct{}{}
	if n == nil {
		d.dirs[p] = make(map[string]struct{})
		return
	}
	d.files[p] = n
	if !n.linked {
		n.linked = true
		d.used += int64(len(n.data))
	}
}

// unlink removes p from the live namespace.
func (d *Disk) unlink(p string) {
	delete(d.dirs[parentDir(p)], baseName(p))
	if n := d.files[p]; n != nil {
		delete(d.files, p)
		n.linked = false
		d.used -= int64(len(n.data))
		return
	}
	delete(d.dirs, p)
}

// checkParent reports whether p's parent directory exists.
func (d *Disk) checkParent(p string) error {
	dir := parentDir(p)
	if _, ok := d.dirs[dir]; ok {
		return nil
	}
	if d.files[dir] != nil {
		return ErrNotDir
	}
	return engine.ErrNotFound
}

// Rename implements engine.Disk. Only files can be renamed; a file at to
// is replaced.
func (c *diskClient) Rename(from, to string, done func(err error)) {
	cf, err1 := cleanPath(from)
	ct, err2 := cleanPath(to)
	c.d.submit(c.inc, DiskRename, cf, 0, 0, func(o DiskOutcome) error {
		if err := firstErr(err1, err2, c.d.checkParent(ct)); err != nil {
			return err
		}
		return c.d.rename(cf, ct, o)
	}, done)
}

func (d *Disk) rename(from, to string, o DiskOutcome) error {
	n := d.files[from]
	switch {
	case n == nil && d.dirs[from] != nil:
		return ErrIsDir
	case n == nil:
		return engine.ErrNotFound
	case d.dirs[to] != nil:
		return ErrIsDir
	case o == DiskIOError:
		return ErrIO
	case from == to:
		return nil
	}
	if d.files[to] != nil {
		d.unlink(to)
	}
	d.unlink(from)
	d.link(to, n)
	d.logOp(&dirOp{kind: dirRename, path: from, to: to, node: n})
	return nil
}

// Remove implements engine.Disk: a file, or an empty directory.
func (c *diskClient) Remove(p string, done func(err error)) {
	cp, perr := cleanPath(p)
	c.d.submit(c.inc, DiskRemove, cp, 0, 0, func(o DiskOutcome) error {
		if perr != nil {
			return perr
		}
		return c.d.remove(cp, o)
	}, done)
}

func (d *Disk) remove(p string, o DiskOutcome) error {
	children, isDir := d.dirs[p]
	switch {
	case p == "":
		return ErrBadPath
	case !isDir && d.files[p] == nil:
		return engine.ErrNotFound
	case isDir && len(children) > 0:
		return ErrNotEmpty
	case o == DiskIOError:
		return ErrIO
	}
	d.unlink(p)
	d.logOp(&dirOp{kind: dirRemove, path: p})
	return nil
}

// ReadDir implements engine.Disk.
func (c *diskClient) ReadDir(dir string, done func(names []string, err error)) {
	cd, perr := cleanPath(dir)
	var names []string
	c.d.submit(c.inc, DiskReadDir, cd, 0, 0, func(o DiskOutcome) error {
		if perr != nil {
			return perr
		}
		var err error
		names, err = c.d.readDir(cd, o)
		return err
	}, func(err error) { done(names, err) })
}

func (d *Disk) readDir(dir string, o DiskOutcome) ([]string, error) {
	children, ok := d.dirs[dir]
	switch {
	case !ok && d.files[dir] != nil:
		return nil, ErrNotDir
	case !ok:
		return nil, engine.ErrNotFound
	case o == DiskIOError:
		return nil, ErrIO
	}
	names := make([]string, 0, len(children))
	for name := range children {
		names = append(names, name)
	}
	slices.Sort(names) // the order of the map never leaks
	return names, nil
}

// SyncDir implements engine.Disk. It makes durable the entry operations
// of dir that had completed when SyncDir was called; one completing while
// the SyncDir is in flight may or may not be covered, and the model says
// it is not.
func (c *diskClient) SyncDir(dir string, done func(err error)) {
	cd, perr := cleanPath(dir)
	upTo := c.d.opSeq
	c.d.submit(c.inc, DiskSyncDir, cd, 0, 0, func(o DiskOutcome) error {
		if perr != nil {
			return perr
		}
		if _, ok := c.d.dirs[cd]; !ok {
			if c.d.files[cd] != nil {
				return ErrNotDir
			}
			return engine.ErrNotFound
		}
		if o == DiskIOError {
			return ErrIO
		}
		c.d.syncDir(cd, upTo)
		return nil
	}, done)
}

// MkdirAll implements engine.Disk. Each directory it creates is an entry
// of its parent, durable only after SyncDir of that parent.
func (c *diskClient) MkdirAll(dir string, done func(err error)) {
	cd, perr := cleanPath(dir)
	c.d.submit(c.inc, DiskMkdirAll, cd, 0, 0, func(o DiskOutcome) error {
		if perr != nil {
			return perr
		}
		return c.d.mkdirAll(cd, o)
	}, done)
}

func (d *Disk) mkdirAll(dir string, o DiskOutcome) error {
	var missing []string
	for p := dir; p != ""; p = parentDir(p) {
		if _, ok := d.dirs[p]; ok {
			break
		}
		if d.files[p] != nil {
			return ErrNotDir
		}
		missing = append(missing, p)
	}
	if len(missing) == 0 {
		return nil
	}
	if o == DiskIOError {
		return ErrIO
	}
	if o == DiskNoSpace {
		return ErrNoSpace
	}
	for i := len(missing) - 1; i >= 0; i-- {
		d.link(missing[i], nil)
		d.logOp(&dirOp{kind: dirMkdir, path: missing[i]})
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
