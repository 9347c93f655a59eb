package storage

import (
	"fmt"
	"os"

	"github.com/ncw/directio"

	"github.com/skipprd/skipprd/engine"
)

// zeroFillChunk is the size of one zero write of zeroFill.
const zeroFillChunk = 1 << 20

// zeroFill writes zeros over [from, size) of f, aligned for O_DIRECT
// when direct is set (from is rounded down to engine.DirectAlign: the
// bytes before it are zeros already or are rewritten as the caller's
// own header right after).
func zeroFill(f *os.File, from, size int64, direct bool) error {
	if direct {
		from -= from % engine.DirectAlign
		if size%engine.DirectAlign != 0 {
			return fmt.Errorf("storage: allocate %s to %d: %w", f.Name(), size, errMisaligned)
		}
	}
	zeros := directio.AlignedBlock(zeroFillChunk)
	for off := from; off < size; {
		n := min(int64(len(zeros)), size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}
