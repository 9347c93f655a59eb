package wal

import (
	"fmt"
	"strconv"
	"strings"
)

// Root is the WAL's directory, relative to the disk's root.
const Root = "wal"

const (
	partitionPrefix = "partition-"
	segmentPrefix   = "segment-"
	segmentSuffix   = ".wal"
	segmentDigits   = 12
	segmentNameLen  = len(segmentPrefix) + segmentDigits + len(segmentSuffix)
)

// PartitionDir is partition p's directory: "wal/partition-{p}".
//
// REQUIRES: p < PartitionsMax (panics otherwise: no reader would list it).
func PartitionDir(p uint32) string {
	if p >= PartitionsMax {
		panic(fmt.Sprintf("wal: partition %d, limit %d", p, PartitionsMax))
	}
	return Root + "/" + partitionPrefix + strconv.FormatUint(uint64(p), 10)
}

// SegmentName is the file name of segment n: "segment-{n:012}.wal".
//
// REQUIRES: n ≤ SegmentNumberMax (panics otherwise: the name would have
// more than 12 digits and ParseSegmentName would not recognise it).
func SegmentName(n uint64) string {
	if n > SegmentNumberMax {
		panic(fmt.Sprintf("wal: segment number %d, limit %d", n, uint64(SegmentNumberMax)))
	}
	return fmt.Sprintf("%s%0*d%s", segmentPrefix, segmentDigits, n, segmentSuffix)
}

// SegmentPath is segment n of partition p:
// "wal/partition-{p}/segment-{n:012}.wal". REQUIRES as PartitionDir and
// SegmentName.
func SegmentPath(p uint32, n uint64) string { return PartitionDir(p) + "/" + SegmentName(n) }

// ParseSegmentName returns the number a segment file name carries. It
// accepts exactly SegmentName's output: "segment-", 12 ASCII digits,
// ".wal"; anything else (a temporary file, a stray name) is not a segment.
func ParseSegmentName(name string) (n uint64, ok bool) {
	if len(name) != segmentNameLen || !strings.HasPrefix(name, segmentPrefix) || !strings.HasSuffix(name, segmentSuffix) {
		return 0, false
	}
	digits := name[len(segmentPrefix) : len(segmentPrefix)+segmentDigits]
	for i := range len(digits) {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
		n = n*10 + uint64(digits[i]-'0')
	}
	return n, true
}

// ParsePartitionDir returns the partition a directory name under Root
// carries. It accepts exactly the last element of PartitionDir's output:
// "partition-" and a canonical decimal below PartitionsMax (no sign, no
// leading zero except "0" itself).
func ParsePartitionDir(name string) (p uint32, ok bool) {
	digits, found := strings.CutPrefix(name, partitionPrefix)
	if !found || len(digits) == 0 || len(digits) > len(strconv.Itoa(PartitionsMax-1)) ||
		(len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	for i := range len(digits) {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
		p = p*10 + uint32(digits[i]-'0')
	}
	if p >= PartitionsMax {
		return 0, false
	}
	return p, true
}
