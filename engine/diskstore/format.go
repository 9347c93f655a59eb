package diskstore

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/zeebo/xxh3"

	"github.com/skipprd/skipprd/engine"
)

// Object file: a header, then the body.
//
//	offset  size  field
//	0       4     magic "SKDO"
//	4       2     format version (1), big-endian like every integer here
//	6       2     key length K, 1..KeyMax
//	8       8     last-modified time, Unix ms (signed)
//	16      8     body length B, ≤ BodyMax
//	24      16    body digest: XXH3-128 of the body (the ETag)
//	40      K     the key, so a file under the wrong name is caught
//	40+K    8     XXH3-64 of bytes [0, 40+K)
//	48+K    B     the body
//
// Part files of a multipart upload have the same format (the key is the
// upload's key). Upload metadata files:
//
//	0       4     magic "SKDU"
//	4       2     format version (1)
//	6       2     key length K, 1..KeyMax
//	8       8     initiated time, Unix ms (signed)
//	16      K     the key
//	16+K    8     XXH3-64 of bytes [0, 16+K)
//
// XXH3 is not a cryptographic hash: it has to detect damage and tell
// versions apart, not resist an adversary who can already write the
// directory, and it is fast enough to run on the loop over segment-sized
// bodies. A single PUT's ETag equals the simulator store's.
const (
	objectMagic   = "SKDO"
	uploadMagic   = "SKDU"
	formatVersion = 1

	objectFixed = 40 // header bytes before the key
	metaFixed   = 16 // metadata bytes before the key
	sumLen      = 8  // trailing XXH3-64

	// headerMax is the longest header, the most GET and HEAD read first.
	headerMax = objectFixed + KeyMax + sumLen
	// metaMax is the longest metadata file.
	metaMax = metaFixed + KeyMax + sumLen

	// BodyMax is the largest body a header may declare: S3's object size
	// limit. A larger length is corruption, refused before anything is
	// sized from it.
	BodyMax = 5 << 40
)

// header is an object (or part) file's header.
type header struct {
	key            string
	modifiedUnixMs int64
	bodyLen        int64
	digest         [16]byte
}

// size is the header's length in bytes: where the body starts.
func (h header) size() int64 { return int64(objectFixed + len(h.key) + sumLen) }

// etag is the ETag of the body: its digest in quoted lowercase hex.
func (h header) etag() string { return etagOf(h.digest) }

func etagOf(d [16]byte) string {
	out := make([]byte, 0, 2+2*len(d))
	out = append(out, '"')
	out = hex.AppendEncode(out, d[:])
	return string(append(out, '"'))
}

// digestOf is the body digest.
func digestOf(body []byte) [16]byte { return xxh3.Hash128(body).Bytes() }

// encodeHeader returns h's bytes.
// REQUIRES: 1 ≤ len(h.key) ≤ KeyMax, 0 ≤ h.bodyLen ≤ BodyMax.
func encodeHeader(h header) []byte {
	b := make([]byte, 0, h.size())
	b = append(b, objectMagic...)
	b = binary.BigEndian.AppendUint16(b, formatVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.key)))
	b = binary.BigEndian.AppendUint64(b, uint64(h.modifiedUnixMs))
	b = binary.BigEndian.AppendUint64(b, uint64(h.bodyLen))
	b = append(b, h.digest[:]...)
	b = append(b, h.key...)
	return binary.BigEndian.AppendUint64(b, xxh3.Hash(b))
}

// decodeHeader parses the header at the start of b (b may hold body bytes
// after it, or be cut short by the end of the file). Every failure is
// corruption: a file under an object name was written whole, synced and
// only then renamed there.
func decodeHeader(b []byte) (header, error) {
	if len(b) < objectFixed {
		return header{}, fmt.Errorf("header cut short: %d bytes", len(b))
	}
	if string(b[:4]) != objectMagic {
		return header{}, fmt.Errorf("bad magic %q", b[:4])
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != formatVersion {
		return header{}, fmt.Errorf("unknown format version %d", v)
	}
	k := int(binary.BigEndian.Uint16(b[6:]))
	if k < 1 || k > KeyMax {
		return header{}, fmt.Errorf("key length %d out of [1, %d]", k, KeyMax)
	}
	end := objectFixed + k
	if len(b) < end+sumLen {
		return header{}, fmt.Errorf("header cut short: %d bytes, the key needs %d", len(b), end+sumLen)
	}
	if got, want := binary.BigEndian.Uint64(b[end:]), xxh3.Hash(b[:end]); got != want {
		return header{}, fmt.Errorf("header checksum %016x, the header hashes to %016x", got, want)
	}
	bodyLen := binary.BigEndian.Uint64(b[16:])
	if bodyLen > BodyMax {
		return header{}, fmt.Errorf("body length %d exceeds %d", bodyLen, uint64(BodyMax))
	}
	h := header{
		key:            string(b[objectFixed:end]),
		modifiedUnixMs: int64(binary.BigEndian.Uint64(b[8:])),
		bodyLen:        int64(bodyLen),
	}
	copy(h.digest[:], b[24:40])
	return h, nil
}

// meta is an upload's metadata.
type meta struct {
	key             string
	initiatedUnixMs int64
}

// encodeMeta returns m's bytes. REQUIRES: 1 ≤ len(m.key) ≤ KeyMax.
func encodeMeta(m meta) []byte {
	b := make([]byte, 0, metaFixed+len(m.key)+sumLen)
	b = append(b, uploadMagic...)
	b = binary.BigEndian.AppendUint16(b, formatVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.key)))
	b = binary.BigEndian.AppendUint64(b, uint64(m.initiatedUnixMs))
	b = append(b, m.key...)
	return binary.BigEndian.AppendUint64(b, xxh3.Hash(b))
}

// decodeMeta parses a whole metadata file; trailing bytes are corruption.
func decodeMeta(b []byte) (meta, error) {
	if len(b) < metaFixed {
		return meta{}, fmt.Errorf("metadata cut short: %d bytes", len(b))
	}
	if string(b[:4]) != uploadMagic {
		return meta{}, fmt.Errorf("bad magic %q", b[:4])
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != formatVersion {
		return meta{}, fmt.Errorf("unknown format version %d", v)
	}
	k := int(binary.BigEndian.Uint16(b[6:]))
	if k < 1 || k > KeyMax {
		return meta{}, fmt.Errorf("key length %d out of [1, %d]", k, KeyMax)
	}
	end := metaFixed + k
	if len(b) != end+sumLen {
		return meta{}, fmt.Errorf("metadata of %d bytes, the key says %d", len(b), end+sumLen)
	}
	if got, want := binary.BigEndian.Uint64(b[end:]), xxh3.Hash(b[:end]); got != want {
		return meta{}, fmt.Errorf("checksum %016x, the metadata hashes to %016x", got, want)
	}
	return meta{key: string(b[metaFixed:end]), initiatedUnixMs: int64(binary.BigEndian.Uint64(b[8:]))}, nil
}

// corrupt is a corruption error naming the file.
func corrupt(path string, err error) error {
	return fmt.Errorf("%w: diskstore: %s: %v", engine.ErrCorrupt, path, err)
}
