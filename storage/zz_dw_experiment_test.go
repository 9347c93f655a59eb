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

func BenchmarkZZDiskWALZeroFill(b *testing.B) {
	for _, mode := range []string{"stalled-store", "sparse"} {
		zf := mode == "zerofill"
		name := mode
		mk := func(b *testing.B) *Host {
			var h *Host
			if mode == "stalled-store" {
				var st *dwStallStore
				h = dwHost(b, b.TempDir(), dwEngineConfig(engine.SyncEveryBatch), func(s engine.ObjectStore) engine.ObjectStore {
					st = &dwStallStore{ObjectStore: s}
					return st
				})
				if err := h.Start(b.Context()); err != nil {
					b.Fatal(err)
				}
				st.stalled.Store(true)
				return h
			}
			if zf {
				h = zfWrap(b, b.TempDir(), dwEngineConfig(engine.SyncEveryBatch))
			} else {
				h = dwHost(b, b.TempDir(), dwEngineConfig(engine.SyncEveryBatch), nil)
			}
			if err := h.Start(b.Context()); err != nil {
				b.Fatal(err)
			}
			return h
		}
		var sat float64
		b.Run(name+"/sync", func(b *testing.B) {
			units := dwUnits(dwWriters, 1, dwPayloadBytes)
			h := mk(b)
			st0 := dwStats(b, h)
			b.ResetTimer()
			r := dwDrive(b, h, units, b.N, 0)
			b.StopTimer()
			st1 := dwStats(b, h)
			h.Kill()
			r.report(b)
			b.ReportMetric(float64(r.n)/float64(st1.WALSyncs-st0.WALSyncs), "entries/fsync")
			sat = float64(r.n) / r.elapsed.Seconds()
		})
		for _, frac := range []float64{0.5, 0.25} {
			b.Run(name+"/load="+map[float64]string{0.5: "half", 0.25: "quarter"}[frac], func(b *testing.B) {
				units := dwUnits(dwWriters, 1, dwPayloadBytes)
				h := mk(b)
				b.ResetTimer()
				r := dwDrive(b, h, units, b.N, sat*frac)
				b.StopTimer()
				h.Kill()
				r.report(b)
				b.ReportMetric(sat*frac, "offered/s")
				b.ReportMetric(dwPercentile(r.sched, 0.99), "p99-sched-us")
			})
		}
	}
}
