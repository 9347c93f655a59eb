package storage

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ncw/directio"

	"github.com/skipprd/skipprd/engine"
)

// BenchmarkLogFileSync measures what a log file's preallocation costs
// each group commit: one op is a 4 KiB O_DIRECT write at the next offset
// of a 32 MiB log file, then its fdatasync, through the port (a new file
// when one is full, made as the WAL makes its segments).
//
//   - sparse-ftruncate: the file sized by Truncate, as the WAL did before
//     Allocate: no blocks, so every fdatasync also commits the block
//     allocation of the write it syncs (a journal transaction).
//   - fallocate: the file's blocks reserved by Allocate up front.
//
// Both report p50-us and p99-us per op.
func BenchmarkLogFileSync(b *testing.B) {
	const fileBytes = 32 << 20
	for _, c := range []struct {
		name string
		size func(f engine.File, done func(error))
	}{
		{"sparse-ftruncate", func(f engine.File, done func(error)) { f.Truncate(fileBytes, done) }},
		{"fallocate", func(f engine.File, done func(error)) { f.Allocate(fileBytes, done) }},
		{"zero-filled", func(f engine.File, done func(error)) {
			of := f.(*osFile)
			done(zeroFill(of.f, 0, fileBytes, true))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			td := newTestDisk(b)
			block := directio.AlignedBlock(engine.DirectAlign)
			lat := make([]time.Duration, 0, b.N)
			var f engine.File
			var off int64 = fileBytes
			for i := 0; b.Loop(); i++ {
				if off == fileBytes {
					f, off = newLogFile(b, td, fmt.Sprint(i), c.size), 0
				}
				start := time.Now()
				if err := td.call(func(done func(error)) { f.WriteAt(block, off, done) }); err != nil {
					b.Fatal(err)
				}
				if err := td.call(f.Sync); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				off += engine.DirectAlign
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-us")
		})
	}
}

// newLogFile creates a Direct log file named name and sizes it.
func newLogFile(b *testing.B, td *testDisk, name string, size func(engine.File, func(error))) engine.File {
	f, err := td.open(name, engine.OpenMode{Create: true, Write: true, Direct: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := td.call(func(done func(error)) { size(f, done) }); err != nil {
		b.Fatal(err)
	}
	return f
}
