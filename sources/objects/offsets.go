package objects

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/skipprd/skipprd/engine/segment"
)

// offsetKeyPrefix starts every offset key of this package.
const offsetKeyPrefix = "objects/"

// parquetDone marks the offset of a Parquet object's last unit: the
// value is then parquetDone | row groups. A Parquet object's row-group
// count is in its footer, so without the mark telling whether it is
// done would cost a read of every object at every poll. Values below
// the mark count row groups ingested so far; every value with it is
// above them all, so offsets still only grow.
const parquetDone = uint64(1) << 63

// offsetKey is the offset key of an object: "objects/{name}/{key}", or,
// when that is longer than an offset key may be (256 bytes),
// "objects/{name}#/{sha256 of key, hex}". A name holds no '#' (Config.check),
// so a hashed key never equals a plain one of any source.
func offsetKey(name, key string) string {
	k := offsetKeyPrefix + name + "/" + key
	if len(k) <= segment.OffsetKeyBytesMax {
		return k
	}
	sum := sha256.Sum256([]byte(key))
	return offsetKeyPrefix + name + "#/" + hex.EncodeToString(sum[:])
}

// done reports whether an object of format f and size bytes is ingested
// in full when its offset is value. An empty object is done from the
// start: it has nothing to ingest.
func done(f format, value uint64, size int64) bool {
	switch {
	case size <= 0:
		return true
	case f == parquetFile:
		return value&parquetDone != 0
	}
	return value >= uint64(size)
}

// ownOffsets returns the entries of view that belong to source name:
// its keys, plain and hashed, and its floor.
func ownOffsets(view segment.Offsets, name string) segment.Offsets {
	plain, hashed, floor := family(name), offsetKeyPrefix+name+"#/", segment.FloorKey(family(name), "")
	var own segment.Offsets
	for _, o := range view {
		if strings.HasPrefix(o.Key, plain) || strings.HasPrefix(o.Key, hashed) || strings.HasPrefix(o.Key, floor) {
			own = append(own, o) // view is sorted, so own is
		}
	}
	return own
}
