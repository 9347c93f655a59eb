package segment

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Offsets checkpoint (the pipeline's _offsets object), version 1:
//
//	"OFCP" | u16 version=1 | u64 writer_epoch | u32 offsets_len | offsets blob
//	| [32] sha256 of every preceding byte
//
// Segments are deleted once applied; the offsets they committed must
// outlive them, or a restart would forget how far the sources got. The
// checkpoint holds the offsets view (max over every commit so far) and is
// written before a segment's marker is deleted. It is several objects in
// this format: _offsets with the source offsets, and one per time bucket
// of idempotency keys (the engine's checkpoint.go); an _offsets written
// before buckets existed holds the idempotency keys too. The blob uses the
// offsets encoding, with a larger entry bound: a bucket holds every
// idempotency key submitted in its span.

const (
	checkpointMagic   = "OFCP"
	CheckpointVersion = 1
	checkpointKind    = "offsets checkpoint"
	// CheckpointEntriesMax bounds the offsets a checkpoint holds.
	CheckpointEntriesMax = 1 << 18
	// CheckpointBytesMax bounds a checkpoint object.
	CheckpointBytesMax = magicBytes + versionBytes + 8 + 4 + offsetsCountBytes +
		CheckpointEntriesMax*(lenPrefixBytes+OffsetKeyBytesMax+8) + sumBytes
)

// EncodeCheckpoint returns the checkpoint object for offsets.
func EncodeCheckpoint(epoch uint64, o Offsets) ([]byte, error) {
	if err := o.validate(CheckpointEntriesMax); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	b := make([]byte, 0, magicBytes+versionBytes+8+4+o.encodedLen()+sumBytes)
	b = append(b, checkpointMagic...)
	b = binary.LittleEndian.AppendUint16(b, CheckpointVersion)
	b = binary.LittleEndian.AppendUint64(b, epoch)
	b = binary.LittleEndian.AppendUint32(b, uint32(o.encodedLen()))
	b = appendOffsetEntries(b, o)
	sum := sha256.Sum256(b)
	return append(b, sum[:]...), nil
}

// DecodeCheckpoint parses and verifies a checkpoint object.
func DecodeCheckpoint(name string, b []byte) (epoch uint64, o Offsets, err error) {
	if len(b) > CheckpointBytesMax {
		return 0, nil, &FormatError{Kind: checkpointKind, Object: name, Field: "checkpoint", Err: ErrCorrupt,
			Detail: fmt.Sprintf("%d bytes, limit %d", len(b), CheckpointBytesMax)}
	}
	c := newCursor(checkpointKind, name, b, 0)
	c.magic("magic", checkpointMagic)
	c.version("version", CheckpointVersion)
	if err := c.failed(); err != nil {
		return 0, nil, err
	}
	if err := checkTrailingSum(c, "sha256"); err != nil {
		return 0, nil, err
	}
	epoch = c.u64("writer_epoch")
	n := int(c.bounded("offsets_len", 4, uint64(c.remaining())))
	blob := newCursor(checkpointKind, name, c.take("offsets", n), c.at()-int64(n))
	o = blob.offsetsLimited("offsets", CheckpointEntriesMax)
	blob.end("offsets")
	c.end("checkpoint")
	if err := firstErr(c, blob); err != nil {
		return 0, nil, err
	}
	return epoch, o, nil
}
