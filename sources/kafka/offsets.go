package kafka

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/skipprd/skipprd/engine/segment"
)

// offsetKeyPrefix starts every offset key of this package.
const offsetKeyPrefix = "kafka/"

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

// offsetKey is the offset key of a partition:
// "kafka/{name}/{topic}/{partition}", or, when that is longer than an
// offset key may be (256 bytes), "kafka/{name}#/{sha256 of the topic,
// hex}/{partition}". A name holds no '#' (Config.check), so a hashed key
// never equals a plain one. Its value is the offset of the partition's
// next record: the last ingested record's offset + 1.
func offsetKey(name string, p tp) string {
	part := "/" + strconv.FormatInt(int64(p.partition), 10)
	k := offsetKeyPrefix + name + "/" + p.topic + part
	if len(k) <= segment.OffsetKeyBytesMax {
		return k
	}
	sum := sha256.Sum256([]byte(p.topic))
	return offsetKeyPrefix + name + "#/" + hex.EncodeToString(sum[:]) + part
}

// resumeAt returns, for each partition of topics found in view (the
// host's recovered offsets), the offset of its next record.
func resumeAt(view segment.Offsets, name string, parts []tp) map[tp]int64 {
	out := map[tp]int64{}
	for _, p := range parts {
		if v, ok := view.Get(offsetKey(name, p)); ok {
			out[p] = int64(v)
		}
	}
	return out
}

// ownKeys counts the entries of view that belong to source name.
func ownKeys(view segment.Offsets, name string) int {
	plain, hashed := offsetKeyPrefix+name+"/", offsetKeyPrefix+name+"#/"
	n := 0
	for _, o := range view {
		if strings.HasPrefix(o.Key, plain) || strings.HasPrefix(o.Key, hashed) {
			n++
		}
	}
	return n
}
