package sim

import (
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// runWorkload runs a randomized world — a toy engine exercising every
// port, with store and disk faults, LIST lag, and kills followed by disk
// crashes — for up to steps events, and returns its trace hash and the
// number of events run. out, if not nil, receives the text trace.
func runWorkload(seed, steps uint64, out io.Writer) (hash, ran uint64) {
	s, _ := newWorkload(seed, out, nil)
	ran = s.Run(steps)
	return s.Trace().Hash(), ran
}

// newWorkload builds runWorkload's world, with rec (if not nil) attached
// to its trace, and returns its scheduler and store; the caller steps it.
func newWorkload(seed uint64, out io.Writer, rec *Recorder) (*Scheduler, *Store) {
	root := NewRand(seed)
	tr := NewTrace()
	if out != nil {
		tr.SetWriter(out)
	}
	if rec != nil {
		tr.SetRecorder(rec)
	}
	s := NewScheduler(root.Split("sched"), tr, SchedulerConfig{})
	st := NewStore(s, root.Split("store"), StoreConfig{
		PageSize: 3, ListLagMax: 50 * time.Millisecond, ListLingerMax: 50 * time.Millisecond,
		AmbiguousLandMax: 20 * time.Millisecond,
		Faults: StoreFaultsFunc(func(_ Op, _ string, r *Rand) (Outcome, time.Duration) {
			if r.Chance(0.9) {
				return OK, 0
			}
			return Outcome(1 + r.Intn(4)), r.Exp(5 * time.Millisecond)
		}),
	})
	d := NewDisk(s, root.Split("disk"), DiskConfig{
		Faults: DiskFaultsFunc(func(_ DiskOp, _ string, r *Rand) (DiskOutcome, time.Duration) {
			if r.Chance(0.97) {
				return DiskOK, 0
			}
			return DiskOutcome(1 + r.Intn(3)), r.Exp(time.Millisecond)
		}),
	})
	world := root.Split("world")
	var start func()
	start = func() {
		inc := s.NewIncarnation()
		id := strconv.FormatUint(inc.ID(), 10)
		e := &toyEngine{store: st.Client(inc), disk: d.Client(inc), timers: inc.Timers(),
			exec: inc.Executor(), rand: root.Split("engine/" + id)}
		e.boot()
		s.After(world.Exp(300*time.Millisecond), func() {
			inc.Kill()
			d.Crash(root.Split("crash/" + id))
			start()
		})
	}
	start()
	return s, st
}

// toyEngine issues random requests on every port, chaining on callbacks.
type toyEngine struct {
	store  engine.ObjectStore
	disk   engine.Disk
	timers engine.Timers
	exec   engine.Executor
	rand   *Rand
	log    engine.File
}

func (e *toyEngine) boot() {
	e.disk.MkdirAll("wal", func(error) {
		e.disk.Open("wal/log", engine.OpenMode{Create: true, Write: true}, func(f engine.File, err error) {
			if errors.Is(err, engine.ErrExists) {
				e.disk.Open("wal/log", engine.OpenMode{Write: true}, func(f engine.File, err error) {
					if err == nil {
						e.log = f
					}
				})
				return
			}
			if err == nil {
				e.log = f
				e.disk.SyncDir("wal", func(error) {})
			}
		})
	})
	e.tick()
}

func (e *toyEngine) tick() {
	e.timers.AfterFunc(e.rand.Exp(2*time.Millisecond), func() {
		e.act()
		e.tick()
	})
}

func (e *toyEngine) act() {
	key := "k/" + strconv.Itoa(e.rand.Intn(8))
	body := []byte(strconv.FormatUint(e.rand.Uint64(), 16))
	switch e.rand.Intn(9) {
	case 0:
		e.store.PutObject(engine.PutObjectInput{Key: key, Body: body, IfNoneMatch: e.rand.Chance(0.3)}, func(string, error) {})
	case 1:
		e.store.GetObject(engine.GetObjectInput{Key: key, Limit: 1 << 20}, func([]byte, engine.ObjectInfo, error) {})
	case 2:
		e.store.HeadObject(key, func(engine.ObjectInfo, error) {})
	case 3:
		e.listFrom("")
	case 4:
		e.store.DeleteObject(key, func(error) {})
	case 5:
		e.multipart(key, body)
	case 6:
		e.store.ListMultipartUploads("k/", "", "", func(p engine.UploadsPage, err error) {
			if err == nil && len(p.Uploads) > 0 {
				e.store.AbortMultipartUpload(p.Uploads[0].Key, p.Uploads[0].UploadID, func(error) {})
			}
		})
	case 7:
		if e.log != nil {
			e.log.Append(body, func(int64, error) {})
			e.log.Sync(func(error) {})
		}
	case 8:
		cancel := e.timers.AfterFunc(time.Millisecond, func() {})
		e.exec.Go(func() { _ = e.rand.Uint64() }, cancel)
	}
}

func (e *toyEngine) listFrom(token string) {
	e.store.ListObjects("k/", token, func(p engine.ListPage, err error) {
		if err == nil && p.NextToken != "" {
			e.listFrom(p.NextToken)
		}
	})
}

func (e *toyEngine) multipart(key string, body []byte) {
	e.store.CreateMultipartUpload(key, func(id string, err error) {
		if err != nil {
			return
		}
		e.store.UploadPart(key, id, 1, body, func(etag string, err error) {
			if err == nil && e.rand.Chance(0.7) {
				e.store.CompleteMultipartUpload(key, id, []engine.CompletedPart{{Number: 1, ETag: etag}}, func(error) {})
			}
		})
	})
}

// BenchmarkWorkload measures simulated events per second on one core.
func BenchmarkWorkload(b *testing.B) {
	const steps = 100_000
	for b.Loop() {
		runWorkload(uint64(b.N), steps, nil)
	}
	b.ReportMetric(float64(steps)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
