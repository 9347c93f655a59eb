package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/ncw/directio"
	tidwall "github.com/tidwall/wal"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/diskstore"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/engine/wal"
	"github.com/skipprd/skipprd/internal/logbuf"
)

// BenchmarkDiskWALGroupCommit measures the local-disk WAL's group commit
// on real files (b.TempDir(); the first line of output says whether the
// filesystem took O_DIRECT or the port fell back to buffered I/O +
// fdatasync), against baselines in the same run. One op is one log entry
// made durable; every sub-benchmark reports entries/s, and the closed-loop
// ones p50-us / p99-us: the time from a writer's call to its ack.
//
//   - engine-sync: a storage.Host in disk mode wired like the daemon's
//     default (WAL_SYNC_MODE=SYNC, one WAL partition, 32 MiB segments,
//     256 KiB batches, segments in a diskstore under the same root, no
//     sinks). 64 writers, closed loop: each submits a unit — one Arrow
//     batch of one row with a 1 KiB payload, built once per writer, with
//     its own offset key — and the next only after the previous was
//     acked. Also fsyncs/s and entries/fsync (engine.Stats.WALSyncs,
//     which also counts batches holding only seal or flushed records),
//     and B/entry: the framed size of one unit's log entry.
//
//   - engine-sync-half-load: the same host, open loop at half of
//     engine-sync's saturated entries/s (the largest run of engine-sync
//     in this process, or a pre-run of dwPreRunEntries if there was none
//     big enough). Submissions are timer-paced, entry i due at
//     start + i/rate on writer i%64. p50-us / p99-us from the call,
//     p99-sched-us from the due time (it adds a writer's lateness: a
//     timer that fired late, or a previous ack that came after the next
//     due time). The target is p99 ≤ 2 ms; it is reported, not asserted.
//
//   - engine-batch-sync: engine-sync with WAL_SYNC_MODE=BATCH_SYNC (the
//     default 10 ms interval).
//
//   - fsync-per-write (baseline a): the 64 writers append 1 KiB payloads
//     framed like the WAL (wal.AppendEntry: length, payload, CRC-32C) to
//     one file preallocated like the engine's segments (Truncate to
//     32 MiB, rolled when full), write and fdatasync under one mutex:
//     the naive log, buffered writes.
//
//   - tidwall-wal (baseline b): github.com/tidwall/wal with its default
//     options (NoSync false: fsync after every Write); the 64 writers
//     take the next index and Write 1 KiB under a mutex.
//
//   - batch-256k-ceiling (baseline c, the ratios' reference): one writer
//     frames 256 KiB buffers of 1 KiB entries and writes each with one
//     fdatasync, in the engine's own write pattern (O_DIRECT where the
//     filesystem takes it, the partly filled last block rewritten, writes
//     padded to 4 KiB; sparse preallocated files): what the disk gives the
//     WAL's largest group commit with nothing else to do.
//
// Each sub-benchmark's run is bounded by -benchtime (one op per entry;
// the default 1 s makes the whole group about 20 s on two cores):
//
//	go test ./storage -run '^$' -bench DiskWALGroupCommit
func BenchmarkDiskWALGroupCommit(b *testing.B) {
	dwProbeDirect(b, b.TempDir())
	b.Run("engine-sync", func(b *testing.B) { benchDiskWALEngine(b, engine.SyncEveryBatch) })
	b.Run("engine-sync-half-load", benchDiskWALHalfLoad)
	b.Run("engine-batch-sync", func(b *testing.B) { benchDiskWALEngine(b, engine.BatchSync) })
	b.Run("fsync-per-write", benchDiskWALFsyncPerWrite)
	b.Run("tidwall-wal", benchDiskWALTidwall)
	b.Run("batch-256k-ceiling", benchDiskWALCeiling)
}

const (
	dwWriters       = 64
	dwPayloadBytes  = 1 << 10
	dwCeilingBuffer = 256 << 10                     // the engine's default BatchBytes
	dwFileBytes     = engine.DefaultWALSegmentBytes // baselines' preallocated files
	dwPreRunEntries = 20_000                        // half-load's own saturation run, if needed
	dwSaturatedMinN = 5_000                         // smallest engine-sync run trusted as saturated
	dwMemoryHint    = 8 << 30                       // the Memory port's fixed answer
	dwCloseTimeout  = 2 * time.Minute
	dwRecoveryEnv   = "SKIPPRD_BENCH_RECOVERY_MB"
)

// dwFixedMemory is a Memory port with a fixed hint: admission is then
// 2.8 GiB, room for the recovery benchmark's memtable.
type dwFixedMemory int64

func (m dwFixedMemory) AvailableBytes() int64 { return int64(m) }

var (
	dwDirectOnce, dwDirectLogged sync.Once
	dwDirectNote                 string
)

// dwProbeDirect finds out, once per process, whether the filesystem
// under dir takes O_DIRECT: a probe file opened through an OSDisk, as
// the engine opens its log segments.
func dwProbeDirect(b *testing.B, dir string) {
	dwDirectOnce.Do(func() {
		logs := &logbuf.Buffer{}
		l := NewLoop()
		go func() { _ = l.Run(context.Background()) }()
		defer l.Stop()
		d, err := NewOSDisk(l, dir, DiskOptions{Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			b.Fatal(err)
		}
		type opened struct {
			f   engine.File
			err error
		}
		r, err := Call(l, func(done func(opened)) {
			d.Open("probe", engine.OpenMode{Create: true, Write: true, Direct: true}, func(f engine.File, err error) { done(opened{f, err}) })
		})
		if err == nil {
			err = r.err
		}
		if err != nil {
			b.Fatal(err)
		}
		direct := r.f.Direct()
		if _, err := Call(l, func(done func(error)) { r.f.Close(done) }); err != nil {
			b.Fatal(err)
		}
		fsType := "?"
		if out, err := os.ReadFile("/proc/mounts"); err == nil {
			fsType = dwMountType(string(out), dir)
		}
		if direct {
			dwDirectNote = fmt.Sprintf("disk: O_DIRECT in effect under %s (%s), %d CPUs", dir, fsType, runtime.NumCPU())
		} else {
			dwDirectNote = fmt.Sprintf("disk: O_DIRECT refused under %s (%s): buffered I/O + fdatasync, %d CPUs; OSDisk logged: %s",
				dir, fsType, runtime.NumCPU(), strings.TrimSpace(logs.String()))
		}
	})
}

// dwLogDirect logs the probe's finding once per process, from the first
// sub-benchmark that runs (a parent benchmark's log is not printed).
func dwLogDirect(b *testing.B) {
	dwDirectLogged.Do(func() { b.Log(dwDirectNote) })
}

// dwMountType returns the filesystem type of the longest mount point
// that contains dir, from /proc/mounts.
func dwMountType(mounts, dir string) string {
	best, typ := "", "?"
	for line := range bytes.Lines([]byte(mounts)) {
		f := bytes.Fields(line)
		if len(f) < 3 {
			continue
		}
		mp := string(f[1])
		if (dir == mp || mp == "/" || len(dir) > len(mp) && dir[:len(mp)] == mp && dir[len(mp)] == '/') && len(mp) >= len(best) {
			best, typ = mp, string(f[2])
		}
	}
	return typ
}

// dwEngineConfig is the daemon's default disk-mode configuration
// (cmd/skipprd: 8 MiB buffer threshold, one ingest thread per CPU, no
// fence for the local segment store, engine.DefaultDiskWAL) with sync
// mode m.
func dwEngineConfig(m engine.SyncMode) engine.Config {
	cfg := engine.DeriveConfig("wal", "bench-disk", 8<<20, runtime.NumCPU(), 0)
	cfg.FenceWait = 0
	cfg.Disk = engine.DefaultDiskWAL()
	cfg.Disk.Sync = m
	return cfg
}

// dwNewHost builds a disk-mode host rooted at root (log under wal/,
// segments in a diskstore under segments/) and starts it. wrap, if not
// nil, wraps the segment store.
func dwNewHost(b *testing.B, root string, cfg engine.Config, wrap func(engine.ObjectStore) engine.ObjectStore) *Host {
	b.Helper()
	h := dwHost(b, root, cfg, wrap)
	if err := h.Start(context.Background()); err != nil {
		h.Kill()
		b.Fatal(err)
	}
	return h
}

// dwHost builds a disk-mode host, not started.
func dwHost(b *testing.B, root string, cfg engine.Config, wrap func(engine.ObjectStore) engine.ObjectStore) *Host {
	b.Helper()
	l := NewLoop()
	d, err := NewOSDisk(l, root, DiskOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	var store engine.ObjectStore = diskstore.New(d, l.Clock(), NewRand(), "segments")
	if wrap != nil {
		store = wrap(store)
	}
	h, err := NewHost(cfg, l, HostPorts{Store: store, Disk: d, Memory: dwFixedMemory(dwMemoryHint)})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

func dwClose(b *testing.B, h *Host) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dwCloseTimeout)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

func dwStats(b *testing.B, h *Host) engine.Stats {
	b.Helper()
	st, err := h.Stats(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// dwUnits builds one unit per writer, rows rows of payloadBytes each,
// namespaces round robin. Offsets are set per submission.
func dwUnits(writers, rows, payloadBytes int) []engine.Unit {
	units := make([]engine.Unit, writers)
	for w := range units {
		units[w] = engine.Unit{
			Key:     walKey(walNamespaces[w%len(walNamespaces)]),
			Schema:  walSchema,
			Batches: []arrow.RecordBatch{walBatch(fmt.Sprintf("w%02d", w), rows, payloadBytes)},
		}
	}
	return units
}

func dwRelease(units []engine.Unit) {
	for _, u := range units {
		releaseUnit(u)
	}
}

// dwEntryBytes is the framed size of u's log entry, encoded as the
// engine encodes it (wal_disk_unit.go: one IPC stream of the batches).
func dwEntryBytes(b *testing.B, u engine.Unit) int {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(u.Schema), ipc.WithAllocator(memory.DefaultAllocator))
	for _, rec := range u.Batches {
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	p, err := wal.AppendUnit(nil, wal.UnitRecord{Seq: 1 << 40, Key: u.Key, Offsets: segment.Offsets{{Key: "bench/w00", Value: 1 << 20}}, Arrow: buf.Bytes()})
	if err != nil {
		b.Fatal(err)
	}
	return wal.EntryBytes(len(p))
}

// dwRun is what one drive of the writers measured.
type dwRun struct {
	n        int
	elapsed  time.Duration
	lat      []time.Duration // call to ack, sorted
	sched    []time.Duration // due time to ack, sorted (open loop only)
	refusals int64           // ErrResourceExhausted answers, retried
}

// dwDrive submits n units from dwWriters goroutines and returns once all
// are acked. rate 0: closed loop, each writer submits its next unit when
// the previous one was acked. rate > 0: entry i is due at start + i/rate
// on writer i%dwWriters, which submits it then (or as soon as its
// previous unit was acked, if that is later).
func dwDrive(b *testing.B, h *Host, units []engine.Unit, n int, rate float64) dwRun {
	ctx := context.Background()
	var next atomic.Int64
	var refusals atomic.Int64
	lats := make([][]time.Duration, len(units))
	scheds := make([][]time.Duration, len(units))
	var period time.Duration
	if rate > 0 {
		period = time.Duration(float64(time.Second) / rate)
	}
	var wg sync.WaitGroup
	start := time.Now()
	if rate > 0 {
		start = start.Add(time.Millisecond) // every writer has started by then
	}
	for w := range units {
		wg.Go(func() {
			u := units[w]
			key := fmt.Sprintf("bench/w%02d", w)
			for seq, k := uint64(1), 0; ; seq, k = seq+1, k+1 {
				var i int
				var due time.Time
				if rate > 0 {
					i = w + k*len(units)
					due = start.Add(time.Duration(i) * period)
					if d := time.Until(due); d > 0 {
						time.Sleep(d)
					}
				} else {
					i = int(next.Add(1) - 1)
				}
				if i >= n {
					return
				}
				u.Offsets = segment.Offsets{{Key: key, Value: seq}}
				t0 := time.Now()
				refused, err := ingestUntilTaken(ctx, h, u, 200*time.Microsecond)
				refusals.Add(refused)
				if err != nil {
					b.Error(err)
					return
				}
				t1 := time.Now()
				lats[w] = append(lats[w], t1.Sub(t0))
				if rate > 0 {
					scheds[w] = append(scheds[w], t1.Sub(due))
				}
			}
		})
	}
	wg.Wait()
	r := dwRun{n: n, elapsed: time.Since(start), refusals: refusals.Load()}
	r.lat, r.sched = slices.Concat(lats...), slices.Concat(scheds...)
	slices.Sort(r.lat)
	slices.Sort(r.sched)
	return r
}

// dwPercentile is the nearest-rank q-quantile of sorted, in µs.
func dwPercentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return float64(sorted[min(max(i, 0), len(sorted)-1)]) / float64(time.Microsecond)
}

func (r dwRun) report(b *testing.B) {
	b.ReportMetric(float64(r.n)/r.elapsed.Seconds(), "entries/s")
	b.ReportMetric(dwPercentile(r.lat, 0.50), "p50-us")
	b.ReportMetric(dwPercentile(r.lat, 0.99), "p99-us")
	if r.refusals > 0 {
		b.Logf("%d submissions refused with ErrResourceExhausted and retried", r.refusals)
	}
}

// dwSaturated is engine-sync's entries/s at its largest b.N in this
// process (the mean over runs of that size).
var dwSaturated struct {
	mu   sync.Mutex
	n    int
	runs int
	rate float64
}

func dwNoteSaturated(n int, rate float64) {
	s := &dwSaturated
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case n > s.n:
		s.n, s.runs, s.rate = n, 1, rate
	case n == s.n:
		s.runs++
		s.rate += (rate - s.rate) / float64(s.runs)
	}
}

func benchDiskWALEngine(b *testing.B, mode engine.SyncMode) {
	dwLogDirect(b)
	units := dwUnits(dwWriters, 1, dwPayloadBytes)
	defer dwRelease(units)
	entry := dwEntryBytes(b, units[0])
	b.SetBytes(int64(entry))
	h := dwNewHost(b, b.TempDir(), dwEngineConfig(mode), nil)
	st0 := dwStats(b, h)
	b.ResetTimer()
	r := dwDrive(b, h, units, b.N, 0)
	b.StopTimer()
	st1 := dwStats(b, h)
	dwClose(b, h)
	r.report(b)
	syncs := float64(st1.WALSyncs - st0.WALSyncs)
	b.ReportMetric(syncs/r.elapsed.Seconds(), "fsyncs/s")
	b.ReportMetric(float64(r.n)/max(syncs, 1), "entries/fsync")
	b.ReportMetric(float64(entry), "B/entry")
	if mode == engine.SyncEveryBatch {
		dwNoteSaturated(b.N, float64(r.n)/r.elapsed.Seconds())
	}
}

func benchDiskWALHalfLoad(b *testing.B) {
	dwLogDirect(b)
	s := &dwSaturated
	s.mu.Lock()
	rate, n := s.rate, s.n
	s.mu.Unlock()
	units := dwUnits(dwWriters, 1, dwPayloadBytes)
	defer dwRelease(units)
	if n < dwSaturatedMinN {
		h := dwNewHost(b, b.TempDir(), dwEngineConfig(engine.SyncEveryBatch), nil)
		r := dwDrive(b, h, units, dwPreRunEntries, 0)
		dwClose(b, h)
		rate = float64(r.n) / r.elapsed.Seconds()
		dwNoteSaturated(r.n, rate)
		b.Logf("pre-run: engine-sync saturates at %.0f entries/s (%d entries, closed loop)", rate, r.n)
	}
	half := rate / 2
	entry := dwEntryBytes(b, units[0])
	b.SetBytes(int64(entry))
	h := dwNewHost(b, b.TempDir(), dwEngineConfig(engine.SyncEveryBatch), nil)
	st0 := dwStats(b, h)
	b.ResetTimer()
	r := dwDrive(b, h, units, b.N, half)
	b.StopTimer()
	st1 := dwStats(b, h)
	dwClose(b, h)
	r.report(b)
	b.ReportMetric(half, "offered/s")
	b.ReportMetric(dwPercentile(r.sched, 0.99), "p99-sched-us")
	syncs := float64(st1.WALSyncs - st0.WALSyncs)
	b.ReportMetric(float64(r.n)/max(syncs, 1), "entries/fsync")
}

// dwFile is a baseline's log: files of dwFileBytes under dir,
// preallocated as the engine preallocates its log segments (Truncate:
// sparse), written in order; a full file is closed and removed (the
// engine deletes flushed segments too) and the next one created. direct
// asks for the engine's write pattern: O_DIRECT where the filesystem
// takes it, every write starting at the block boundary below the end —
// rewriting the partly filled last block — and padded with zeros to the
// next one.
type dwFile struct {
	dir      string
	direct   bool // asked for
	isDirect bool // in effect
	num      int
	f        *os.File
	off      int64
	size     int64
	buf      []byte // direct: aligned, the last block's bytes first
	tail     int    // direct: bytes of the partly filled last block in buf
}

func newDWFile(b *testing.B, dir string, direct bool, bufBytes int) *dwFile {
	l := &dwFile{dir: dir, size: dwFileBytes, direct: direct}
	if direct {
		l.buf = directio.AlignedBlock(bufBytes + 2*engine.DirectAlign)
	}
	if err := l.roll(); err != nil {
		b.Fatal(err)
	}
	return l
}

func (l *dwFile) roll() error {
	if l.f != nil {
		name := l.f.Name()
		if err := l.f.Close(); err != nil {
			return err
		}
		if err := os.Remove(name); err != nil {
			return err
		}
	}
	l.num++
	name := filepath.Join(l.dir, fmt.Sprintf("log-%06d", l.num))
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	err = f.Truncate(l.size)
	if err == nil {
		err = fdatasync(f)
	}
	if err == nil {
		err = syncDir(l.dir)
	}
	if err == nil && l.direct {
		var df *os.File
		df, err = directio.OpenFile(name, os.O_RDWR, 0)
		switch {
		case err == nil:
			f.Close()
			f, l.isDirect = df, true
		case errors.Is(err, syscall.EINVAL):
			err = nil // buffered, as the engine falls back
		}
	}
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.off, l.tail = f, 0, 0
	return nil
}

// append writes entries at the end and fdatasyncs.
func (l *dwFile) append(entries []byte) error {
	if l.off+int64(len(entries))+engine.DirectAlign > l.size {
		if err := l.roll(); err != nil {
			return err
		}
	}
	if !l.isDirect {
		if _, err := l.f.WriteAt(entries, l.off); err != nil {
			return err
		}
		l.off += int64(len(entries))
		return fdatasync(l.f)
	}
	at := l.off - int64(l.tail)
	n := l.tail + copy(l.buf[l.tail:], entries)
	if n != l.tail+len(entries) {
		return fmt.Errorf("dwFile: %d bytes do not fit the %d-byte buffer", len(entries), len(l.buf))
	}
	padded := (n + engine.DirectAlign - 1) / engine.DirectAlign * engine.DirectAlign
	clear(l.buf[n:padded])
	if _, err := l.f.WriteAt(l.buf[:padded], at); err != nil {
		return err
	}
	l.off += int64(len(entries))
	full := n / engine.DirectAlign * engine.DirectAlign
	l.tail = copy(l.buf, l.buf[full:n])
	return fdatasync(l.f)
}

func (l *dwFile) close() error { return l.f.Close() }

// dwPayload is a 1 KiB payload that differs per writer.
func dwPayload(w int) []byte { return walPayload(fmt.Sprintf("w%02d", w), 0, dwPayloadBytes) }

// dwClosedLoop runs n writes from dwWriters goroutines, closed loop, and
// returns the sorted call-to-return latencies.
func dwClosedLoop(b *testing.B, n int, write func(w int) error) dwRun {
	var next atomic.Int64
	lats := make([][]time.Duration, dwWriters)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range dwWriters {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				t0 := time.Now()
				if err := write(w); err != nil {
					b.Error(err)
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	r := dwRun{n: n, elapsed: time.Since(start), lat: slices.Concat(lats...)}
	slices.Sort(r.lat)
	return r
}

func benchDiskWALFsyncPerWrite(b *testing.B) {
	dwLogDirect(b)
	entry := wal.EntryBytes(dwPayloadBytes)
	b.SetBytes(int64(entry))
	log := newDWFile(b, b.TempDir(), false, 0)
	var mu sync.Mutex
	frames := make([][]byte, dwWriters)
	for w := range frames {
		frames[w] = make([]byte, 0, entry)
	}
	b.ResetTimer()
	r := dwClosedLoop(b, b.N, func(w int) error {
		frames[w] = wal.AppendEntry(frames[w][:0], dwPayload(w))
		mu.Lock()
		defer mu.Unlock()
		return log.append(frames[w])
	})
	b.StopTimer()
	if err := log.close(); err != nil {
		b.Fatal(err)
	}
	r.report(b)
}

func benchDiskWALTidwall(b *testing.B) {
	dwLogDirect(b)
	b.SetBytes(dwPayloadBytes)
	l, err := tidwall.Open(b.TempDir(), nil) // DefaultOptions: NoSync false
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var last uint64
	payloads := make([][]byte, dwWriters)
	for w := range payloads {
		payloads[w] = dwPayload(w)
	}
	b.ResetTimer()
	r := dwClosedLoop(b, b.N, func(w int) error {
		mu.Lock()
		defer mu.Unlock()
		if err := l.Write(last+1, payloads[w]); err != nil {
			return err
		}
		last++
		return nil
	})
	b.StopTimer()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	r.report(b)
}

func benchDiskWALCeiling(b *testing.B) {
	dwLogDirect(b)
	entry := wal.EntryBytes(dwPayloadBytes)
	perBuf := dwCeilingBuffer / entry
	b.SetBytes(int64(entry))
	log := newDWFile(b, b.TempDir(), true, dwCeilingBuffer)
	if !log.isDirect {
		b.Log("O_DIRECT refused: the ceiling writes buffered, as the engine then does")
	}
	payload := dwPayload(0)
	buf := make([]byte, 0, dwCeilingBuffer)
	syncs := 0
	b.ResetTimer()
	start := time.Now()
	for left := b.N; left > 0; left -= perBuf {
		buf = buf[:0]
		for range min(left, perBuf) {
			buf = wal.AppendEntry(buf, payload)
		}
		if err := log.append(buf); err != nil {
			b.Fatal(err)
		}
		syncs++
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if err := log.close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "entries/s")
	b.ReportMetric(float64(syncs)/elapsed.Seconds(), "fsyncs/s")
	b.ReportMetric(float64(b.N)/float64(syncs), "entries/fsync")
}

// BenchmarkDiskWALRecovery measures the disk WAL's crash recovery: a new
// Host's Start — read every log segment (fsync, whole-file read, scan),
// rebuild the sealed generations, replay the rest into the memtable —
// until it is ready, over a log of dwRecoveryMB MB (512; 64 with -short;
// SKIPPRD_BENCH_RECOVERY_MB=n sets it), against sequential-read: the same
// segment files read one after the other with os.ReadFile. Both start
// from a cold page cache (every file fdatasynced and dropped with
// POSIX_FADV_DONTNEED before each op, on Linux). MB/s counts the log's
// file bytes (the segments are preallocated: the last one's unwritten
// tail is read too, by both). engine-replay also reports units/s.
//
// The log is written once per unit size, through a Host in disk mode
// whose segment store stalls every call once the host is ready: the
// engine's flush delay is auto-tuned to at most 500 ms whatever
// TargetBytes and MaxDelay say, so the only way to keep the memtable's
// generations in the log is a store that never answers. (TargetBytes
// and MaxDelay are raised anyway, and the WAL's valves — total and
// partition bytes, pinned age — are raised past the log's size.) 64
// writers ingest until the log holds the target; every unit is acked
// (fsynced); then the host is killed, as a crash would (no flush, no
// close). Each op runs on hard links to those files in a fresh DATA_DIR,
// so the replay's new segment and anything it deletes do not touch the
// fixture; the replayed host is killed as soon as Start returns.
//
//	go test ./storage -run '^$' -bench DiskWALRecovery -benchtime 1x
//
// Two unit sizes: unit=1KiB (the group-commit benchmark's units: one row
// of 1 KiB) and unit=64KiB (64 such rows).
func BenchmarkDiskWALRecovery(b *testing.B) {
	root := b.TempDir()
	dwProbeDirect(b, root)
	target := dwRecoveryBytes(b)
	for _, rows := range []int{1, 64} {
		name := fmt.Sprintf("unit=%dKiB", rows*dwPayloadBytes>>10)
		var fx *dwRecoveryFixture
		fixture := func(b *testing.B) *dwRecoveryFixture {
			if fx == nil {
				fx = dwBuildRecovery(b, filepath.Join(root, name), rows, target)
			}
			return fx
		}
		b.Run(name+"/engine-replay", func(b *testing.B) { benchDiskWALReplay(b, fixture(b), root) })
		b.Run(name+"/sequential-read", func(b *testing.B) { benchDiskWALSeqRead(b, fixture(b)) })
	}
}

func dwRecoveryBytes(b *testing.B) int64 {
	mb := int64(512)
	if testing.Short() {
		mb = 64
	}
	if v := os.Getenv(dwRecoveryEnv); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a positive number of MB", dwRecoveryEnv, v)
		}
		mb = n
	}
	return mb << 20
}

// dwRecoveryFixture is a crashed DATA_DIR.
type dwRecoveryFixture struct {
	dir      string
	cfg      engine.Config
	units    uint64   // acked before the crash
	walFiles []string // the log's segment files, in order
	walBytes int64
}

// dwRecoveryConfig keeps everything in the log: generations large and
// late, valves past the log's size, memory for the memtable.
func dwRecoveryConfig(target int64) engine.Config {
	cfg := dwEngineConfig(engine.SyncEveryBatch)
	cfg.TargetBytes = 1 << 40
	cfg.MaxDelay = time.Hour
	cfg.Disk.TotalBytesMax = 4*target + 1<<30
	cfg.Disk.PartitionBytesMax = 4*target + 1<<30
	cfg.Disk.PinnedMax = time.Hour
	return cfg
}

// dwStallStore answers nothing once stalled: persists, reads, lists.
type dwStallStore struct {
	engine.ObjectStore
	stalled atomic.Bool
	calls   atomic.Int64 // calls left unanswered
}

func (s *dwStallStore) stall() bool {
	if s.stalled.Load() {
		s.calls.Add(1)
		return true
	}
	return false
}

func (s *dwStallStore) PutObject(in engine.PutObjectInput, done func(string, error)) {
	if !s.stall() {
		s.ObjectStore.PutObject(in, done)
	}
}

func (s *dwStallStore) GetObject(in engine.GetObjectInput, done func([]byte, engine.ObjectInfo, error)) {
	if !s.stall() {
		s.ObjectStore.GetObject(in, done)
	}
}

func (s *dwStallStore) HeadObject(key string, done func(engine.ObjectInfo, error)) {
	if !s.stall() {
		s.ObjectStore.HeadObject(key, done)
	}
}

func (s *dwStallStore) ListObjects(prefix, token string, done func(engine.ListPage, error)) {
	if !s.stall() {
		s.ObjectStore.ListObjects(prefix, token, done)
	}
}

func (s *dwStallStore) DeleteObject(key string, done func(error)) {
	if !s.stall() {
		s.ObjectStore.DeleteObject(key, done)
	}
}

func (s *dwStallStore) CreateMultipartUpload(key string, done func(string, error)) {
	if !s.stall() {
		s.ObjectStore.CreateMultipartUpload(key, done)
	}
}

func (s *dwStallStore) UploadPart(key, id string, n int32, body []byte, done func(string, error)) {
	if !s.stall() {
		s.ObjectStore.UploadPart(key, id, n, body, done)
	}
}

func (s *dwStallStore) CompleteMultipartUpload(key, id string, parts []engine.CompletedPart, done func(error)) {
	if !s.stall() {
		s.ObjectStore.CompleteMultipartUpload(key, id, parts, done)
	}
}

func (s *dwStallStore) AbortMultipartUpload(key, id string, done func(error)) {
	if !s.stall() {
		s.ObjectStore.AbortMultipartUpload(key, id, done)
	}
}

func (s *dwStallStore) ListMultipartUploads(prefix, keyMarker, idMarker string, done func(engine.UploadsPage, error)) {
	if !s.stall() {
		s.ObjectStore.ListMultipartUploads(prefix, keyMarker, idMarker, done)
	}
}

// dwBuildRecovery writes a log of about target bytes of units of rows
// rows under dir and crashes the host.
func dwBuildRecovery(b *testing.B, dir string, rows int, target int64) *dwRecoveryFixture {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	cfg := dwRecoveryConfig(target)
	var stall *dwStallStore
	h := dwNewHost(b, dir, cfg, func(s engine.ObjectStore) engine.ObjectStore {
		stall = &dwStallStore{ObjectStore: s}
		return stall
	})
	stall.stalled.Store(true)
	units := dwUnits(dwWriters, rows, dwPayloadBytes)
	defer dwRelease(units)
	n := int((target + int64(dwEntryBytes(b, units[0])) - 1) / int64(dwEntryBytes(b, units[0])))
	start := time.Now()
	r := dwDrive(b, h, units, n, 0)
	st := dwStats(b, h)
	h.Kill() // every unit was acked, so its entry is fsynced
	if st.UnitsAcked != uint64(n) {
		b.Fatalf("%d units acked, %d submitted", st.UnitsAcked, n)
	}
	fx := &dwRecoveryFixture{dir: dir, cfg: cfg, units: st.UnitsAcked}
	err := filepath.WalkDir(filepath.Join(dir, wal.Root), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fx.walFiles = append(fx.walFiles, p)
		fx.walBytes += info.Size()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("recovery fixture (target %d MB: 512 by default, 64 with -short, or %s): %d units of %d rows (%.0f entries/s while writing it, %v), %d log segments, %d MiB; %d store calls stalled",
		target>>20, dwRecoveryEnv, n, rows, float64(r.n)/r.elapsed.Seconds(), time.Since(start).Round(time.Millisecond), len(fx.walFiles), fx.walBytes>>20,
		stall.calls.Load())
	runtime.GC()
	return fx
}

// dwLinkTree makes a fresh directory under parent with hard links to
// every file of src (the directories recreated).
func dwLinkTree(b *testing.B, src, parent string) string {
	b.Helper()
	dst, err := os.MkdirTemp(parent, "run-")
	if err != nil {
		b.Fatal(err)
	}
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		return os.Link(p, to)
	})
	if err != nil {
		b.Fatal(err)
	}
	return dst
}

// dwDropCache makes every file's pages durable and drops them from the
// page cache, so the next read comes from the disk.
func dwDropCache(b *testing.B, files []string) {
	b.Helper()
	for _, name := range files {
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			b.Fatal(err)
		}
		err = fdatasync(f)
		if err == nil {
			err = dropPageCache(f)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

func benchDiskWALReplay(b *testing.B, fx *dwRecoveryFixture, parent string) {
	dwLogDirect(b)
	b.ResetTimer() // building the fixture is not recovery
	b.SetBytes(fx.walBytes)
	var elapsed time.Duration
	for i := range b.N {
		b.StopTimer()
		run := dwLinkTree(b, fx.dir, parent)
		dwDropCache(b, fx.walFiles)
		h := dwHost(b, run, fx.cfg, nil)
		b.StartTimer()
		start := time.Now()
		err := h.Start(context.Background())
		took := time.Since(start)
		elapsed += took
		b.StopTimer()
		if err != nil {
			h.Kill()
			b.Fatal(err)
		}
		st := dwStats(b, h)
		h.Kill() // a background persist may still be running: abandoned
		if st.WALReplayedUnits != fx.units {
			b.Fatalf("replayed %d units, %d were acked before the crash", st.WALReplayedUnits, fx.units)
		}
		b.Logf("op %d: Start took %v", i, took.Round(time.Millisecond))
		time.Sleep(100 * time.Millisecond) // let killed workers' disk calls end
		runtime.GC()
		_ = os.RemoveAll(run) // the parent's TempDir cleanup gets anything left
		b.StartTimer()
	}
	b.ReportMetric(float64(fx.units)*float64(b.N)/elapsed.Seconds(), "units/s")
}

func benchDiskWALSeqRead(b *testing.B, fx *dwRecoveryFixture) {
	dwLogDirect(b)
	b.ResetTimer() // building the fixture is not reading it
	b.SetBytes(fx.walBytes)
	for range b.N {
		b.StopTimer()
		dwDropCache(b, fx.walFiles)
		b.StartTimer()
		var n int64
		for _, name := range fx.walFiles {
			body, err := os.ReadFile(name)
			if err != nil {
				b.Fatal(err)
			}
			n += int64(len(body))
		}
		if n != fx.walBytes {
			b.Fatalf("read %d bytes, the log has %d", n, fx.walBytes)
		}
	}
}
