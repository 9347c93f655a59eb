package httpsrc

import (
	"fmt"
	"math"
)

// Limits bound what one request body may hold. Every limit is at least 1;
// BodyBytes and Rows are at most math.MaxInt32 (values and rows are
// indexed with 32 bits, as Arrow's string offsets are).
type Limits struct {
	BodyBytes int64 // the body cap; reading past it → ErrTooLarge (413)
	LineBytes int   // longest JSON line / CSV line or record, bytes
	Rows      int   // most rows in one body
	Fields    int   // most distinct fields (columns) in one body
	BatchRows int   // rows per output record batch (larger bodies are split)
}

// DefaultLimits: 64 MiB body, 1 MiB line, 1,000,000 rows, 1,024 fields,
// 65,536 rows per batch.
func DefaultLimits() Limits {
	return Limits{BodyBytes: 64 << 20, LineBytes: 1 << 20, Rows: 1_000_000, Fields: 1_024, BatchRows: 65_536}
}

func (l Limits) check() error {
	switch {
	case l.BodyBytes < 1 || l.BodyBytes > math.MaxInt32:
		return fmt.Errorf("httpsrc: Limits.BodyBytes %d outside 1..%d", l.BodyBytes, math.MaxInt32)
	case l.LineBytes < 1:
		return fmt.Errorf("httpsrc: Limits.LineBytes %d; at least 1", l.LineBytes)
	case l.Rows < 1 || l.Rows > math.MaxInt32:
		return fmt.Errorf("httpsrc: Limits.Rows %d outside 1..%d", l.Rows, math.MaxInt32)
	case l.Fields < 1:
		return fmt.Errorf("httpsrc: Limits.Fields %d; at least 1", l.Fields)
	case l.BatchRows < 1:
		return fmt.Errorf("httpsrc: Limits.BatchRows %d; at least 1", l.BatchRows)
	}
	return nil
}

// decodedRatio bounds the Arrow memory a body may decode to, as a
// multiple of BodyBytes. Arrow keeps a slot for every null, so without
// it a few bytes could demand gigabytes: a line {"a":1,…,"z":1} then a
// million lines {} make 26 int64 columns of a million rows from 3 MB.
// Dense bodies take at most about 4× (a CSV of one-digit integers: 2
// bytes in, 8 out); 8× leaves room for sparse ones.
const decodedRatio = 8

// decodedBytesMax is the most Arrow memory one body may decode to.
func (l Limits) decodedBytesMax() int64 { return decodedRatio * l.BodyBytes }
