package engine

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SnapshotID names one committed snapshot. IDs sort in commit order: the
// epoch grows with every writer incarnation (claimed through the writer
// object, see epoch.go) and Seq grows within one.
type SnapshotID struct {
	Epoch uint64
	Seq   uint64
}

const idDigits = 12

func (id SnapshotID) String() string {
	return fmt.Sprintf("%0*d-%0*d", idDigits, id.Epoch, idDigits, id.Seq)
}

// Less orders ids in commit order.
func (id SnapshotID) Less(o SnapshotID) bool {
	return id.Epoch < o.Epoch || id.Epoch == o.Epoch && id.Seq < o.Seq
}

// Compare orders ids in commit order: -1, 0 or +1.
func (id SnapshotID) Compare(o SnapshotID) int {
	switch {
	case id.Less(o):
		return -1
	case o.Less(id):
		return 1
	}
	return 0
}

// ParseSnapshotID parses the form String produces.
func ParseSnapshotID(s string) (SnapshotID, bool) {
	e, q, ok := strings.Cut(s, "-")
	if !ok || len(e) != idDigits || len(q) != idDigits {
		return SnapshotID{}, false
	}
	epoch, err1 := strconv.ParseUint(e, 10, 64)
	seq, err2 := strconv.ParseUint(q, 10, 64)
	if err1 != nil || err2 != nil {
		return SnapshotID{}, false
	}
	return SnapshotID{Epoch: epoch, Seq: seq}, true
}

// ObjectKind is which object of a segment a key names.
type ObjectKind uint8

const (
	KindBody   ObjectKind = iota + 1 // {id}.seg
	KindMarker                       // {id}.seg.commit
	KindBitmap                       // {id}.seg.scbl
)

var kindSuffixes = []struct {
	kind   ObjectKind
	suffix string
}{{KindMarker, ".seg.commit"}, {KindBitmap, ".seg.scbl"}, {KindBody, ".seg"}}

// Layout names the objects of one pipeline:
//
//	{prefix}/{pipeline}/_writer                                   writer epoch object
//	{prefix}/{pipeline}/_offsets                                  offsets checkpoint: source offsets
//	{prefix}/{pipeline}/_idem/{bucket}                            idempotency keys of one time bucket: the manifest of its runs
//	{prefix}/{pipeline}/_idem/{bucket}/{epoch}-{seq}              one run of idempotency keys (immutable)
//	{prefix}/{pipeline}/p_year=YYYY/p_month=MM/p_day=DD/{id}.seg  body
//	… /{id}.seg.commit                                           commit marker
//	… /{id}.seg.scbl                                             completion bitmap
//
// The Hive-style day folders keep a listing from being one unbounded
// prefix; the day is the wall-clock day the snapshot was sealed. A
// bucket is a number of IdemBucketWidth spans since the Unix epoch,
// zero-padded to idemBucketDigits so that keys sort in bucket order.
type Layout struct {
	root string
}

// NewLayout returns the layout for a prefix (may be empty) and pipeline.
func NewLayout(prefix, pipeline string) Layout {
	root := pipeline + "/"
	if p := strings.Trim(prefix, "/"); p != "" {
		root = p + "/" + root
	}
	return Layout{root: root}
}

// Root is the pipeline's key prefix, ending in "/".
func (l Layout) Root() string { return l.root }

// SegmentsPrefix is what recovery lists.
func (l Layout) SegmentsPrefix() string { return l.root + "p_year=" }

// WriterKey is the writer epoch object.
func (l Layout) WriterKey() string { return l.root + "_writer" }

// CheckpointKey is the offsets checkpoint object.
func (l Layout) CheckpointKey() string { return l.root + "_offsets" }

// idemBucketDigits is the width of a bucket number in a key: every
// non-negative int64 fits.
const idemBucketDigits = 19

// IdemBucketsPrefix is the folder of the idempotency-key buckets.
func (l Layout) IdemBucketsPrefix() string { return l.root + "_idem/" }

// IdemBucketKey is the checkpoint object of idempotency-key bucket b.
func (l Layout) IdemBucketKey(b int64) string {
	if b < 0 {
		panic(fmt.Sprintf("engine: idempotency bucket %d", b))
	}
	return fmt.Sprintf("%s%0*d", l.IdemBucketsPrefix(), idemBucketDigits, b)
}

// IdemRunKey is the object of the run (epoch, seq) of bucket b.
func (l Layout) IdemRunKey(b int64, epoch, seq uint64) string {
	return fmt.Sprintf("%s/%020d-%020d", l.IdemBucketKey(b), epoch, seq)
}

// ParseIdemBucketKey returns the bucket an IdemBucketKey or an IdemRunKey
// names.
func (l Layout) ParseIdemBucketKey(key string) (int64, bool) {
	name, ok := strings.CutPrefix(key, l.IdemBucketsPrefix())
	if !ok || len(name) < idemBucketDigits || strings.Trim(name[:idemBucketDigits], "0123456789") != "" {
		return 0, false
	}
	if run := name[idemBucketDigits:]; run != "" {
		epoch, seq, found := strings.Cut(strings.TrimPrefix(run, "/"), "-")
		if !found || run[0] != '/' || len(epoch) != 20 || len(seq) != 20 || strings.Trim(epoch+seq, "0123456789") != "" {
			return 0, false
		}
	}
	b, err := strconv.ParseInt(name[:idemBucketDigits], 10, 64)
	return b, err == nil
}

// SegmentDir is the day folder for a wall-clock time.
func (l Layout) SegmentDir(wallUnixMs int64) string {
	t := time.UnixMilli(wallUnixMs).UTC()
	return fmt.Sprintf("%sp_year=%04d/p_month=%02d/p_day=%02d/", l.root, t.Year(), int(t.Month()), t.Day())
}

// Key names one object of a segment in dir.
func (l Layout) Key(dir string, id SnapshotID, kind ObjectKind) string {
	for _, k := range kindSuffixes {
		if k.kind == kind {
			return dir + id.String() + k.suffix
		}
	}
	panic(fmt.Sprintf("engine: object kind %d", kind))
}

// ParseKey splits a segment object key into its folder, id and kind.
func (l Layout) ParseKey(key string) (dir string, id SnapshotID, kind ObjectKind, ok bool) {
	if !strings.HasPrefix(key, l.SegmentsPrefix()) {
		return "", SnapshotID{}, 0, false
	}
	slash := strings.LastIndexByte(key, '/')
	dir, name := key[:slash+1], key[slash+1:]
	for _, k := range kindSuffixes {
		if base, found := strings.CutSuffix(name, k.suffix); found {
			id, ok := ParseSnapshotID(base)
			return dir, id, k.kind, ok
		}
	}
	return "", SnapshotID{}, 0, false
}
