package storage

import (
	"strings"
	"testing"

	"github.com/ncw/directio"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/diskstore"
)

// TEMPORARY experiment (not part of the deliverable): log segments
// zero-filled at creation instead of sparse.
type zfDisk struct{ *OSDisk }

func (d zfDisk) Open(path string, mode engine.OpenMode, done func(engine.File, error)) {
	if !mode.Create || !strings.HasPrefix(path, "wal/") {
		d.OSDisk.Open(path, mode, done)
		return
	}
	d.OSDisk.Open(path, mode, func(f engine.File, err error) {
		if err != nil {
			done(f, err)
			return
		}
		done(zfFile{f}, nil)
	})
}

type zfFile struct{ engine.File }

var zfZeros = directio.AlignedBlock(1 << 20)

func (f zfFile) Truncate(size int64, done func(error)) {
	var first error
	for off := int64(0); off < size; off += int64(len(zfZeros)) {
		f.File.WriteAt(zfZeros[:min(int64(len(zfZeros)), size-off)], off, func(err error) {
			if first == nil {
				first = err
			}
		})
	}
	f.File.Truncate(size, func(err error) {
		if first == nil {
			first = err
		}
		done(first)
	})
}

func zfWrap(b *testing.B, root string, cfg engine.Config) *Host {
	l := NewLoop()
	d, err := NewOSDisk(l, root, DiskOptions{})
	if err != nil {
		b.Fatal(err)
	}
	store := diskstore.New(d, l.Clock(), NewRand(), "segments")
	h, err := NewHost(cfg, l, HostPorts{Store: store, Disk: zfDisk{d}, Memory: dwFixedMemory(dwMemoryHint)})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

func BenchmarkZZDiskWALFlushInterference(b *testing.B) {
	const rate = 8900
	for _, mode := range []string{"normal", "stalled-store", "zerofill"} {
		b.Run(mode, func(b *testing.B) {
			units := dwUnits(dwWriters, 1, dwPayloadBytes)
			var h *Host
			var st *dwStallStore
			switch mode {
			case "stalled-store":
				h = dwHost(b, b.TempDir(), dwEngineConfig(engine.SyncEveryBatch), func(s engine.ObjectStore) engine.ObjectStore {
					st = &dwStallStore{ObjectStore: s}
					return st
				})
			case "zerofill":
				h = zfWrap(b, b.TempDir(), dwEngineConfig(engine.SyncEveryBatch))
			default:
				h = dwHost(b, b.TempDir(), dwEngineConfig(engine.SyncEveryBatch), nil)
			}
			if err := h.Start(b.Context()); err != nil {
				b.Fatal(err)
			}
			if st != nil {
				st.stalled.Store(true)
			}
			b.ResetTimer()
			r := dwDrive(b, h, units, b.N, rate)
			b.StopTimer()
			stats := dwStats(b, h)
			h.Kill()
			r.report(b)
			b.ReportMetric(dwPercentile(r.lat, 0.90), "p90-us")
			b.ReportMetric(dwPercentile(r.lat, 0.999), "p999-us")
			b.ReportMetric(float64(stats.Commits), "segments")
		})
	}
}
