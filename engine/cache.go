package engine

import "github.com/skipprd/skipprd/engine/segment"

// bodyCache is the LRU of segment bodies (docs/DESIGN.md §8.3). A body enters it
// when its snapshot commits (the writer still has the bytes) or when
// compaction fetches it; compaction pins the bodies its jobs read, and a
// pinned body is never evicted. The cache never holds more than its
// budget: a body that does not fit after evicting every unpinned entry is
// not cached (compaction then streams what it needs).
//
// INVARIANT: used = Σ entry sizes; used ≤ budget, except after the
// budget shrank under pinned bodies (then every entry is pinned, and the
// excess goes as they are unpinned). Eviction never takes an entry with
// pins > 0; drop does (its segment is gone), and a job still reading it
// keeps its own reference. Checked by check (assert.go).
type bodyCache struct {
	budget   int64
	used     int64
	reserved int64  // bytes of bodies being fetched into the cache
	clock    uint64 // last-use stamps; unique, so eviction order is total
	entries  map[SnapshotID]*cacheEntry
	marks    *Marks        // the engine's coverage marks
	inv      invariantHook // the engine's failClosed
}

type cacheEntry struct {
	body    *segment.Body
	size    int64
	pins    int
	lastUse uint64
}

func newBodyCache(budget int64, marks *Marks) *bodyCache {
	return &bodyCache{budget: budget, entries: map[SnapshotID]*cacheEntry{}, marks: marks}
}

// get returns a cached body and pins it; unpin when done.
func (c *bodyCache) get(id SnapshotID) (*segment.Body, bool) {
	e, ok := c.entries[id]
	if !ok {
		return nil, false
	}
	c.clock++
	e.lastUse = c.clock
	e.pins++
	return e.body, true
}

// put caches a verified body, pinned once if pin, evicting unpinned
// entries as needed. It reports whether the body is cached.
func (c *bodyCache) put(id SnapshotID, b *segment.Body, size int64, pin bool) bool {
	if e, ok := c.entries[id]; ok {
		if e.size != size {
			// used counts the first size: another would drift from Σ sizes
			// once this entry is dropped.
			c.inv.broken("a segment's body has one size: %s cached at %d bytes, put again at %d", id, e.size, size)
			return false
		}
		if pin {
			e.pins++
		}
		return true
	}
	if size < 0 {
		c.inv.broken("a cached body's size ≥ 0: %s put at %d bytes", id, size)
		return false
	}
	if !c.makeRoom(size) {
		return false
	}
	c.clock++
	e := &cacheEntry{body: b, size: size, lastUse: c.clock}
	if pin {
		e.pins = 1
	}
	c.entries[id] = e
	c.used += size
	c.check(true)
	return true
}

// canHold reports whether size more bytes fit next to everything pinned
// and reserved, evicting only unpinned entries.
func (c *bodyCache) canHold(size int64) bool {
	if size < 0 {
		// A negative size would pass next to more than the budget.
		c.inv.broken("a body's size asked of the cache ≥ 0: %d bytes, budget %d", size, c.budget)
		return false
	}
	return c.pinnedBytes()+c.reserved+size <= c.budget
}

func (c *bodyCache) pinnedBytes() (n int64) {
	//engine:orderless — a sum.
	for _, e := range c.entries {
		if e.pins > 0 {
			n += e.size
		}
	}
	if n > c.used {
		// used = Σ sizes ≥ the pinned ones: a used below them lets
		// canHold and makeRoom admit more than the budget.
		c.inv.broken("body cache pinned bytes ≤ used: pinned %d, used %d, %d entries", n, c.used, len(c.entries))
	}
	return n
}

func (c *bodyCache) unpin(id SnapshotID) {
	if e, ok := c.entries[id]; ok {
		if e.pins <= 0 {
			// Each get or pinned put is unpinned once: a second unpin
			// would let eviction take a body another job still reads.
			c.inv.broken("a body is unpinned once per pin: %s unpinned with %d pins", id, e.pins)
			return
		}
		e.pins--
	}
	c.makeRoom(0) // a budget that shrank while this was pinned
	c.check(false)
}

// drop removes a body (its segment was reclaimed).
func (c *bodyCache) drop(id SnapshotID) {
	if e, ok := c.entries[id]; ok {
		c.used -= e.size
		delete(c.entries, id)
		if c.used < 0 {
			c.inv.broken("body cache bytes not negative: used %d after dropping %s of %d bytes", c.used, id, e.size)
		}
	}
}

// resize changes the budget and evicts down to it (pinned entries stay).
func (c *bodyCache) resize(budget int64) {
	c.budget = budget
	c.makeRoom(0)
	c.check(false)
}

// makeRoom evicts least recently used unpinned entries until size more
// bytes fit; it reports whether they do.
func (c *bodyCache) makeRoom(size int64) bool {
	for c.used+c.reserved+size > c.budget {
		victim, ok := c.oldestUnpinned()
		if !ok {
			return false
		}
		c.marks[MarkCacheEvicted]++
		c.drop(victim)
	}
	return true
}

func (c *bodyCache) oldestUnpinned() (SnapshotID, bool) {
	var best SnapshotID
	var bestUse uint64
	found := false
	//engine:orderless — picks the minimum of unique stamps.
	for id, e := range c.entries {
		if e.pins == 0 && (!found || e.lastUse < bestUse) {
			best, bestUse, found = id, e.lastUse, true
		}
	}
	return best, found
}
