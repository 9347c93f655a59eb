package segment

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
)

// Idempotency-key manifest: the list of runs of one time bucket (the
// engine's _idem/{bucket} object). It is small and rewritten on every
// change (a run added, runs merged into one) with a conditional PUT; the
// runs it names are immutable.
//
//	"IDKM" | u16 version=1 | u64 writer_epoch | u32 runs
//	| runs × (u64 run_epoch | u64 run_seq | u32 count | u64 min_value | u64 max_value)
//	| [32] sha256 of every preceding byte
//
// Runs are sorted by (run_epoch, run_seq), without duplicates; a run's
// name follows from its bucket, epoch and seq (the engine's Layout).

const (
	keyManifestMagic   = "IDKM"
	KeyManifestVersion = 1
	keyManifestKind    = "idempotency-key manifest"
	// KeyManifestRunsMax bounds the runs of one bucket.
	KeyManifestRunsMax  = 256
	keyManifestRunBytes = 8 + 8 + 4 + 8 + 8
	// KeyManifestBytesMax bounds a manifest object.
	KeyManifestBytesMax = magicBytes + versionBytes + 8 + 4 + KeyManifestRunsMax*keyManifestRunBytes + sumBytes
)

// KeyRunRef is a manifest's entry for one run.
type KeyRunRef struct {
	Epoch, Seq      uint64 // name the run: its writer's epoch, and its number in that writer
	Count           int
	MinValue, Value uint64
}

// Less orders refs by (Epoch, Seq).
func (r KeyRunRef) Less(o KeyRunRef) bool {
	return r.Epoch < o.Epoch || r.Epoch == o.Epoch && r.Seq < o.Seq
}

// IsCheckpoint reports whether b starts like an offsets checkpoint (a
// bucket object written before manifests held its keys in that format).
func IsCheckpoint(b []byte) bool {
	return len(b) >= magicBytes && string(b[:magicBytes]) == checkpointMagic
}

// EncodeKeyManifest returns the manifest object listing runs.
func EncodeKeyManifest(epoch uint64, runs []KeyRunRef) ([]byte, error) {
	if err := checkRunRefs(runs); err != nil {
		return nil, err
	}
	b := make([]byte, 0, magicBytes+versionBytes+8+4+len(runs)*keyManifestRunBytes+sumBytes)
	b = append(b, keyManifestMagic...)
	b = binary.LittleEndian.AppendUint16(b, KeyManifestVersion)
	b = binary.LittleEndian.AppendUint64(b, epoch)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(runs)))
	for _, r := range runs {
		b = binary.LittleEndian.AppendUint64(b, r.Epoch)
		b = binary.LittleEndian.AppendUint64(b, r.Seq)
		b = binary.LittleEndian.AppendUint32(b, uint32(r.Count))
		b = binary.LittleEndian.AppendUint64(b, r.MinValue)
		b = binary.LittleEndian.AppendUint64(b, r.Value)
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...), nil
}

func checkRunRefs(runs []KeyRunRef) error {
	if len(runs) > KeyManifestRunsMax {
		return fmt.Errorf("%w: manifest of %d runs, limit %d", ErrTooLarge, len(runs), KeyManifestRunsMax)
	}
	for i, r := range runs {
		switch {
		case r.Count < 1 || r.Count > KeyRunEntriesMax:
			return fmt.Errorf("%w: run %d-%d of %d keys, limit 1..%d", ErrInvalid, r.Epoch, r.Seq, r.Count, KeyRunEntriesMax)
		case r.MinValue > r.Value:
			return fmt.Errorf("%w: run %d-%d values %d..%d", ErrInvalid, r.Epoch, r.Seq, r.MinValue, r.Value)
		case i > 0 && !runs[i-1].Less(r):
			return fmt.Errorf("%w: run %d-%d listed after %d-%d", ErrInvalid, r.Epoch, r.Seq, runs[i-1].Epoch, runs[i-1].Seq)
		}
	}
	return nil
}

// DecodeKeyManifest parses and verifies a manifest object.
func DecodeKeyManifest(name string, b []byte) (epoch uint64, runs []KeyRunRef, err error) {
	if len(b) > KeyManifestBytesMax {
		return 0, nil, &FormatError{Kind: keyManifestKind, Object: name, Field: "manifest", Err: ErrCorrupt,
			Detail: fmt.Sprintf("%d bytes, limit %d", len(b), KeyManifestBytesMax)}
	}
	c := newCursor(keyManifestKind, name, b, 0)
	c.magic("magic", keyManifestMagic)
	c.version("version", KeyManifestVersion)
	if err := c.failed(); err != nil {
		return 0, nil, err
	}
	if err := checkTrailingSum(c, "sha256"); err != nil {
		return 0, nil, err
	}
	epoch = c.u64("writer_epoch")
	n := int(c.bounded("runs", 4, KeyManifestRunsMax))
	runs = make([]KeyRunRef, 0, n)
	for i := range n {
		c.scope = fmt.Sprintf("run[%d].", i)
		runs = append(runs, KeyRunRef{Epoch: c.u64("epoch"), Seq: c.u64("seq"), Count: int(c.u32("count")),
			MinValue: c.u64("min_value"), Value: c.u64("max_value")})
	}
	c.scope = ""
	c.end("manifest")
	if err := c.failed(); err != nil {
		return 0, nil, err
	}
	if err := checkRunRefs(runs); err != nil {
		return 0, nil, &FormatError{Kind: keyManifestKind, Object: name, Field: "runs", Err: ErrCorrupt, Detail: err.Error()}
	}
	return epoch, slices.Clip(runs), nil
}
