package sim

import (
	"slices"
	"strconv"
)

// Crash models power loss under every engine incarnation that used the
// disk (the world calls it right after Incarnation.Kill). The disk comes
// back as a machine would after a reboot:
//
//  1. Directory entries. Every durable entry survives. Of each directory's
//     log of non-durable operations (create, mkdir, remove, rename — in the
//     order they took effect), a seeded prefix survives, possibly empty,
//     possibly all of it. A rename across directories survives, atomically,
//     if either directory's surviving prefix includes it. Entries under a
//     directory that did not survive are gone.
//  2. File contents. Every surviving file keeps its durable image (all
//     bytes covered by a successful, unpoisoned Sync) plus a seeded prefix
//     of its unsynced writes applied in order; with probability 1/2 the
//     last write of that prefix is torn: only a seeded proper prefix of its
//     bytes lands. Writes are never reordered and no byte is invented
//     (a write past the end extends the file with zeros up to its offset,
//     as the write itself would have).
//  3. Everything that survived is now durable; poisoning, open files and
//     pending logs are gone.
//
// r is the crash's own stream (the world splits one per crash), so the
// choices of one crash never shift the next one.
// REQUIRES: every incarnation holding a client of this disk is dead.
func (d *Disk) Crash(r *Rand) {
	for _, c := range d.clients {
		if c.inc.alive {
			panic("sim: Disk.Crash while incarnation " + strconv.FormatUint(c.inc.id, 10) + " is alive (Kill it first)")
		}
	}
	d.clients = d.clients[:0]
	d.counts.Crashes++
	kept, lost := d.crashDirLogs(r)
	d.trace.Begin(d.sched.now, KindDiskCrash).U("dirops_kept", kept).U("dirops_lost", lost).End()
	d.rebuild(r)
}

// crashDirLogs makes a seeded prefix of each directory's log durable, in
// sorted directory order (the map's order must not reach r).
func (d *Disk) crashDirLogs(r *Rand) (kept, lost uint64) {
	dirs := make([]string, 0, len(d.dirLog))
	for dir := range d.dirLog {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		log := d.dirLog[dir]
		for _, op := range log[:r.Intn(len(log)+1)] {
			d.makeDurable(op)
		}
	}
	for _, dir := range dirs {
		for _, op := range d.dirLog[dir] {
			if parentDir(op.path) != dir {
				continue // a cross-directory rename counts once, in its source log
			}
			if op.durable {
				kept++
			} else {
				lost++
			}
		}
	}
	d.dirLog = make(map[string][]*dirOp)
	d.counts.DirOpsKept += kept
	d.counts.DirOpsLost += lost
	return kept, lost
}

// rebuild replaces the live namespace with the durable one, each file
// holding its crash image.
func (d *Disk) rebuild(r *Rand) {
	paths := make([]string, 0, len(d.durable))
	for p, e := range d.durable {
		if e.exists {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths) // parents sort before their children
	old := d.durable
	d.files = make(map[string]*node)
	d.dirs = map[string]map[string]struct{}{"": {}}
	d.durable = make(map[string]durableEntry)
	d.used = 0
	images := make(map[*node]*node)
	for _, p := range paths {
		if _, ok := d.dirs[parentDir(p)]; !ok {
			continue // its directory did not survive
		}
		n := old[p].node
		if n != nil {
			if images[n] == nil {
				images[n] = d.crashImage(n, p, r)
			}
			n = images[n]
		}
		d.link(p, n)
		d.durable[p] = durableEntry{exists: true, node: n}
	}
}

// crashImage returns the node a file comes back as. It takes n's
// durable image for the new node's contents (n is not used after a
// crash: the namespace is rebuilt, every process is gone).
func (d *Disk) crashImage(n *node, p string, r *Rand) *node {
	img := n.durableImg
	n.durableImg = nil
	k := r.Intn(len(n.unsynced) + 1)
	torn := uint64(0)
	for i, w := range n.unsynced[:k] {
		if i == k-1 && !w.truncate && len(w.buf) > 0 && r.Uint64()&1 == 1 {
			torn = 1
			m := r.Intn(len(w.buf)) // a proper prefix, possibly empty
			if m == 0 {
				break
			}
			w.buf = w.buf[:m]
		}
		img = w.apply(img)
	}
	keptWhole := uint64(k) - torn
	lost := uint64(len(n.unsynced) - k)
	d.counts.WritesKept += keptWhole
	d.counts.WritesTorn += torn
	d.counts.WritesLost += lost
	d.trace.Begin(d.sched.now, KindDiskCrashFile).S("path", p).I("size", int64(len(img))).
		U("kept", keptWhole).U("torn", torn).U("lost", lost).End()
	if img == nil {
		img = []byte{}
	}
	return &node{data: img, durableImg: img, shared: true}
}
