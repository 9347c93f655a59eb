package segment

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// A Cut, recorded in a version 3 commit marker, ends one lane's open
// compaction job in the segment whose marker holds it: the job is every
// PART of Group in the segments from First through this one. Because the
// marker is the commit, a job's membership is fixed the moment its cut
// commits, before anything applies it; a replay, a new host or a zombie
// reads the same cut and forms the same job.
//
// Segments and Parts count what the job holds when it is cut, so a reader
// that finds fewer of them live knows that a segment of the job was
// reclaimed — which only happens once the job was applied — and a reader
// that finds more, or other counts, has found corruption.
//
// Wire form (version 3 markers, after the index entries):
//
//	u32 cuts_count | cuts_count × (
//	  u16 len | sink_ref | u16 len | namespace | u64 schema | u8 cdc (0|1)
//	  | u64 first_epoch | u64 first_seq | u32 segments | u32 parts | u8 reason )
//
// Cuts are strictly ascending by group (canonical: one cut per group, the
// same cuts always encode to the same bytes).
type Cut struct {
	Group    Group
	First    SegmentRef // the oldest segment holding the job's PARTs
	Segments uint32     // segments holding its PARTs, ≥ 1
	Parts    uint32     // PARTs in all, ≥ Segments
	Reason   CutReason
}

// Group is what a compaction job's PARTs share: a sink, a namespace, a
// schema and CDC-ness (all or none carry a sidecar).
type Group struct {
	SinkRef   string
	Namespace string
	Schema    SchemaFingerprint
	CDC       bool
}

// GroupOf returns the group of an index entry.
func GroupOf(e IndexEntry) Group {
	return Group{e.Key.SinkRef, e.Key.Namespace, e.Key.Schema, e.HasSidecar()}
}

func (g Group) String() string {
	cdc := ""
	if g.CDC {
		cdc = " cdc"
	}
	return fmt.Sprintf("%s/%s#%016x%s", g.SinkRef, g.Namespace, uint64(g.Schema), cdc)
}

// Compare orders groups by sink, namespace, schema, then CDC-ness.
func (g Group) Compare(o Group) int {
	if c := strings.Compare(g.SinkRef, o.SinkRef); c != 0 {
		return c
	}
	if c := strings.Compare(g.Namespace, o.Namespace); c != 0 {
		return c
	}
	if c := cmp.Compare(g.Schema, o.Schema); c != 0 {
		return c
	}
	return cmp.Compare(b2i(g.CDC), b2i(o.CDC))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// SegmentRef names a segment by its snapshot id (epoch, sequence).
type SegmentRef struct{ Epoch, Seq uint64 }

// Compare orders refs as snapshot ids: epoch, then sequence.
func (r SegmentRef) Compare(o SegmentRef) int {
	if c := cmp.Compare(r.Epoch, o.Epoch); c != 0 {
		return c
	}
	return cmp.Compare(r.Seq, o.Seq)
}

func (r SegmentRef) String() string { return fmt.Sprintf("%012d-%012d", r.Epoch, r.Seq) }

// CutReason says why a lane's job was cut where it was.
type CutReason uint8

const (
	CutSize     CutReason = iota + 1 // its bytes reached the sink's file size
	CutInterval                      // its oldest PART waited the sink's flush interval
	CutValve                         // the WAL held too many segments or bytes
	CutClose                         // a graceful close flushed every lane
	CutShape                         // the lane's schema or CDC-ness changed
	CutEvery                         // the sink takes a job per segment (no limits)
	cutReasonEnd
)

var cutReasonNames = [...]string{"", "size", "interval", "valve", "close", "shape", "every"}

func (r CutReason) String() string {
	if r == 0 || r >= cutReasonEnd {
		return fmt.Sprintf("reason(%d)", uint8(r))
	}
	return cutReasonNames[r]
}

// CutsMax bounds cuts per marker: one per group of open lanes.
const CutsMax = PartsMax

// cutBytesMax bounds one encoded cut.
const cutBytesMax = 2*(lenPrefixBytes+KeyFieldBytesMax) + 8 + 1 + 8 + 8 + 4 + 4 + 1

// CheckCuts reports whether cuts are canonical: each well formed, one per
// group, ascending by group.
func CheckCuts(cuts []Cut) error {
	if len(cuts) > CutsMax {
		return tooLargef("marker: %d cuts, limit %d", len(cuts), CutsMax)
	}
	for i, c := range cuts {
		if err := c.check(); err != nil {
			return fmt.Errorf("marker cut %d: %w", i, err)
		}
		if i > 0 && cuts[i-1].Group.Compare(c.Group) >= 0 {
			return fmt.Errorf("marker cut %d: group %s after %s: %w", i, c.Group, cuts[i-1].Group, ErrCorrupt)
		}
	}
	return nil
}

func (c Cut) check() error {
	k := PartitionKey{SinkRef: c.Group.SinkRef, Namespace: c.Group.Namespace}
	if err := k.Validate(); err != nil {
		return err
	}
	switch {
	case c.Segments == 0 || c.Parts < c.Segments:
		return fmt.Errorf("%w: cut of %s: %d parts in %d segments", ErrCorrupt, c.Group, c.Parts, c.Segments)
	case c.Reason == 0 || c.Reason >= cutReasonEnd:
		return fmt.Errorf("%w: cut of %s: %s", ErrCorrupt, c.Group, c.Reason)
	}
	return nil
}

// SortCuts puts cuts in canonical order.
func SortCuts(cuts []Cut) {
	slices.SortFunc(cuts, func(a, b Cut) int { return a.Group.Compare(b.Group) })
}

func appendCuts(dst []byte, cuts []Cut) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(cuts)))
	for _, c := range cuts {
		dst = appendString16(dst, c.Group.SinkRef)
		dst = appendString16(dst, c.Group.Namespace)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(c.Group.Schema))
		dst = append(dst, byte(b2i(c.Group.CDC)))
		dst = binary.LittleEndian.AppendUint64(dst, c.First.Epoch)
		dst = binary.LittleEndian.AppendUint64(dst, c.First.Seq)
		dst = binary.LittleEndian.AppendUint32(dst, c.Segments)
		dst = binary.LittleEndian.AppendUint32(dst, c.Parts)
		dst = append(dst, byte(c.Reason))
	}
	return dst
}

// cutBytesMin is the smallest encoded cut: 1-byte sink_ref and namespace.
const cutBytesMin = 2*(lenPrefixBytes+1) + 8 + 1 + 8 + 8 + 4 + 4 + 1

// cuts reads a version 3 marker's cuts and checks them.
func (c *cursor) cuts() []Cut {
	n := int(c.bounded("cuts_count", 4, uint64(min(CutsMax, c.remaining()/cutBytesMin))))
	if c.err != nil {
		return nil
	}
	out := make([]Cut, 0, n)
	for i := range n {
		c.scope = fmt.Sprintf("cut[%d].", i)
		start := c.pos
		var cut Cut
		cut.Group.SinkRef = c.keyString("sink_ref", 1)
		cut.Group.Namespace = c.keyString("namespace", 1)
		cut.Group.Schema = SchemaFingerprint(c.u64("schema"))
		cdc := c.u8("cdc")
		cut.Group.CDC = cdc == 1
		cut.First = SegmentRef{c.u64("first_epoch"), c.u64("first_seq")}
		cut.Segments = c.u32("segments")
		cut.Parts = c.u32("parts")
		cut.Reason = CutReason(c.u8("reason"))
		if c.err != nil {
			return nil
		}
		err := cut.check()
		if err == nil && cdc > 1 {
			err = fmt.Errorf("cdc flag %d, want 0 or 1", cdc)
		}
		if err == nil && i > 0 && out[i-1].Group.Compare(cut.Group) >= 0 {
			err = fmt.Errorf("group %s after %s: cuts must ascend", cut.Group, out[i-1].Group)
		}
		if err != nil {
			c.pos = start
			c.fail("cut", ErrCorrupt, "%v", err)
			return nil
		}
		out = append(out, cut)
	}
	c.scope = ""
	return out
}
