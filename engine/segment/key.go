package segment

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// SliceOrdinal is a PART's position in its segment: 0, 1, … in body order.
// It addresses the PART's bit in the completion bitmap.
type SliceOrdinal uint32

// SchemaFingerprint identifies an Arrow schema (field names, types,
// nullability, endianness). A schema change gives a new fingerprint and so
// a new PartitionKey: batches of two schemas never share a PART.
type SchemaFingerprint uint64

// FingerprintOf returns the fingerprint of s: the first 8 bytes (little
// endian) of SHA-256 over arrow-go's canonical schema string. The golden
// vectors pin it, so a library upgrade that changed the string would show
// up as a test failure, not as unreadable segments.
func FingerprintOf(s *arrow.Schema) SchemaFingerprint {
	sum := sha256.Sum256([]byte(s.Fingerprint()))
	return SchemaFingerprint(binary.LittleEndian.Uint64(sum[:8]))
}

// PartitionKey is what a PART is keyed by. Ingest units with equal keys
// extend one PART; distinct keys sit side by side in one segment.
//
// INVARIANT: SinkRef and Namespace are 1..KeyFieldBytesMax bytes, Partition
// 0..KeyFieldBytesMax, all valid UTF-8; !Bucketed ⇒ BucketUnixMs == 0.
type PartitionKey struct {
	SinkRef      string
	Namespace    string
	Partition    string
	Bucketed     bool  // whether the key has a time bucket
	BucketUnixMs int64 // start of the time bucket, Unix milliseconds
	Schema       SchemaFingerprint
}

func (k PartitionKey) String() string {
	bucket := "-"
	if k.Bucketed {
		bucket = fmt.Sprint(k.BucketUnixMs)
	}
	return fmt.Sprintf("%s/%s/%s@%s#%016x", k.SinkRef, k.Namespace, k.Partition, bucket, uint64(k.Schema))
}

// Validate reports whether k satisfies its invariant.
func (k PartitionKey) Validate() error {
	for _, f := range []struct {
		name, v string
		minLen  int
	}{{"sink_ref", k.SinkRef, 1}, {"namespace", k.Namespace, 1}, {"partition", k.Partition, 0}} {
		if len(f.v) < f.minLen || len(f.v) > KeyFieldBytesMax {
			return invalidf("key %s: length %d outside %d..%d", f.name, len(f.v), f.minLen, KeyFieldBytesMax)
		}
		if !utf8.ValidString(f.v) {
			return invalidf("key %s: %q is not UTF-8", f.name, f.v)
		}
	}
	if !k.Bucketed && k.BucketUnixMs != 0 {
		return invalidf("key: bucket %d set without the bucketed flag", k.BucketUnixMs)
	}
	return nil
}

func appendString16(dst []byte, s string) []byte {
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// appendKey appends k's wire form:
//
//	u16 len | sink_ref | u16 len | namespace | u16 len | partition
//	| u8 bucketed (0|1) [ | i64 bucket_unix_ms if bucketed ] | u64 schema
//
// REQUIRES: k.Validate() == nil.
func appendKey(dst []byte, k PartitionKey) []byte {
	dst = appendString16(dst, k.SinkRef)
	dst = appendString16(dst, k.Namespace)
	dst = appendString16(dst, k.Partition)
	if k.Bucketed {
		dst = append(dst, 1)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(k.BucketUnixMs))
	} else {
		dst = append(dst, 0)
	}
	return binary.LittleEndian.AppendUint64(dst, uint64(k.Schema))
}

// key reads a PartitionKey at the cursor and checks its invariant.
func (c *cursor) key() (k PartitionKey) {
	k.SinkRef = c.keyString("key.sink_ref", 1)
	k.Namespace = c.keyString("key.namespace", 1)
	k.Partition = c.keyString("key.partition", 0)
	switch flag := c.u8("key.bucketed"); {
	case c.err != nil:
	case flag == 1:
		k.Bucketed = true
		k.BucketUnixMs = int64(c.u64("key.bucket_unix_ms"))
	case flag != 0:
		c.pos--
		c.fail("key.bucketed", ErrCorrupt, "flag %d, want 0 or 1", flag)
	}
	k.Schema = SchemaFingerprint(c.u64("key.schema"))
	return k
}

func (c *cursor) keyString(field string, minLen int) string {
	start := c.pos
	b := c.bytes(field, KeyFieldBytesMax)
	if c.err == nil && (len(b) < minLen || !utf8.Valid(b)) {
		c.pos = start
		c.fail(field, ErrCorrupt, "%q: empty or not UTF-8", b)
	}
	return string(b)
}

// AppendKey appends k's wire form (see appendKey) to dst, for objects
// outside this package that embed a key (the disk WAL's unit records).
//
// REQUIRES: k.Validate() == nil; callers that cannot guarantee it check
// first, since a key that breaks its invariant would not decode.
func AppendKey(dst []byte, k PartitionKey) []byte { return appendKey(dst, k) }

// DecodeKey reads one key from the start of b and checks its invariant.
// n is the number of bytes the key took; bytes after it are the caller's.
// A failure is a *FormatError whose offsets are relative to b[0].
func DecodeKey(name string, b []byte) (k PartitionKey, n int, err error) {
	c := newCursor("partition key", name, b, 0)
	k = c.key()
	if err := c.failed(); err != nil {
		return PartitionKey{}, 0, err
	}
	return k, c.pos, nil
}
