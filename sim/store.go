package sim

import (
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// Store is the world's object store: an in-memory model of one S3 bucket
// that outlives every engine incarnation. It holds the truth (objects and
// multipart uploads) and hands each incarnation a client port.
//
// Model, per request:
//
//   - At issue the fault injector decides the outcome and extra latency
//     and a latency is sampled (per-op base + tail + size part). Requests
//     from a dead incarnation are discarded unissued.
//   - At completion — a world event, so it runs even if the incarnation
//     died meanwhile, like a request from a SIGKILLed process still landing
//     at S3 — the effect applies atomically (conditions checked at that
//     instant), then the callback is delivered only if the incarnation is
//     still alive.
//   - GET and HEAD read the truth (read-after-write). LIST and
//     ListMultipartUploads read a lagging view: see store_list.go.
type Store struct {
	sched *Scheduler
	trace *Trace
	cfg   StoreConfig
	// Independent streams, so that e.g. a fault plan drawing more values
	// never changes the latencies or list lags of the same seed.
	latRand, lagRand, faultRand, idRand *Rand

	// entries holds every key that exists or is still listed after its
	// deletion. INVARIANT: a key is in entries iff it is in keys.
	entries map[string]*entry
	// keys is the sorted set of entries' keys (listing order).
	keys []string
	// uploads holds every multipart upload in progress or still listed
	// after it finished, by upload id. INVARIANT: an upload is in uploads
	// iff it is in uploadOrder.
	uploads map[string]*upload
	// uploadOrder is uploads sorted by (key, id) (listing order).
	uploadOrder []*upload
	// lingering counts entries and uploads that no longer exist but are
	// still (or were until recently) listed; purgeAt is the count at which
	// expired ones are swept, doubling so sweeping stays amortized O(1).
	lingering, purgeAt int

	// reqSeq numbers requests for the trace.
	reqSeq uint64
	// skew is the request whose latency gets 1ns more (tests only: see
	// World.SkewStoreRequest); 0 means none.
	skew     uint64
	counts   [NumOps]OpCounts
	rotten   []string         // RottenReads
	issuedBy [][NumOps]uint64 // by incarnation id - 1

	// OnApply, if set, is called whenever a mutating request's effect
	// applies successfully (a PUT lands, a DELETE removes, a multipart step
	// takes effect), at the simulated instant it applies, before any
	// callback. Oracles use it to see commit markers land.
	OnApply func(op Op, key string)
}

// StoreConfig tunes the object-store model. The zero value is usable:
// default latencies, no LIST lag, page size 1000, no faults.
type StoreConfig struct {
	// Latency per operation; a zero entry takes DefaultStoreLatency's.
	Latency [NumOps]Latency
	// ListLagMin/Max bound, per key (and per upload), how long after
	// creation it stays invisible to listings.
	ListLagMin, ListLagMax time.Duration
	// ListLingerMin/Max bound how long a deleted key (finished upload)
	// keeps appearing in listings.
	ListLingerMin, ListLingerMax time.Duration
	// PageSize is the most entries one LIST page returns; 0 means 1000.
	// Tests use a small size to exercise pagination.
	PageSize int
	// PartSizeMin is the smallest size of every part but the last that
	// CompleteMultipartUpload accepts (S3: 5 MiB); 0 disables the check.
	PartSizeMin int
	// AmbiguousLandMax: for AmbiguousApplied, the effect lands a uniform
	// [0, AmbiguousLandMax] after the error reached the caller — a request
	// still inside the store when the client timed out. 0: it lands at the
	// same instant the error is delivered.
	AmbiguousLandMax time.Duration
	// Response is how long the answer takes to reach the caller after the
	// effect applied; zero delivers at the same instant. Non-zero opens
	// the window in which a crash loses the answer to a write that landed.
	Response Latency
	// Faults decides each request's outcome; nil means no faults.
	Faults StoreFaults
}

// DefaultStoreLatency is a plausible same-region S3 profile.
var DefaultStoreLatency = [NumOps]Latency{
	OpPut:          {Base: 15 * time.Millisecond, Tail: 10 * time.Millisecond, PerMiB: 8 * time.Millisecond},
	OpGet:          {Base: 10 * time.Millisecond, Tail: 8 * time.Millisecond, PerMiB: 8 * time.Millisecond},
	OpHead:         {Base: 5 * time.Millisecond, Tail: 5 * time.Millisecond},
	OpList:         {Base: 20 * time.Millisecond, Tail: 10 * time.Millisecond},
	OpDelete:       {Base: 10 * time.Millisecond, Tail: 5 * time.Millisecond},
	OpCreateUpload: {Base: 15 * time.Millisecond, Tail: 10 * time.Millisecond},
	OpUploadPart:   {Base: 15 * time.Millisecond, Tail: 10 * time.Millisecond, PerMiB: 8 * time.Millisecond},
	OpComplete:     {Base: 30 * time.Millisecond, Tail: 20 * time.Millisecond},
	OpAbort:        {Base: 10 * time.Millisecond, Tail: 5 * time.Millisecond},
	OpListUploads:  {Base: 20 * time.Millisecond, Tail: 10 * time.Millisecond},
}

// DefaultPageSize is S3's page size.
const DefaultPageSize = 1000

// purgeMin is the smallest lingering count that triggers a sweep.
const purgeMin = 64

// OpCounts are per-operation counters.
type OpCounts struct {
	Issued    uint64 // requests accepted from a live incarnation
	Discarded uint64 // requests from a dead incarnation (never issued)
	Applied   uint64 // mutating requests whose effect applied
	Delivered uint64 // callbacks run
	Dropped   uint64 // callbacks not run: the incarnation had died
	// Outcomes counts the injector's decisions, by Outcome.
	Outcomes [numOutcomes]uint64
	// Corrupted counts answers damaged on the way back (GET only).
	Corrupted uint64
}

// NewStore returns an empty bucket on s. r is the store's stream (split
// from the root seed); the store splits it further per concern.
func NewStore(s *Scheduler, r *Rand, cfg StoreConfig) *Store {
	for op := range NumOps {
		if cfg.Latency[op] == (Latency{}) {
			cfg.Latency[op] = DefaultStoreLatency[op]
		}
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.ListLagMax < cfg.ListLagMin || cfg.ListLingerMax < cfg.ListLingerMin || cfg.AmbiguousLandMax < 0 {
		panic("sim: StoreConfig: a Max below its Min (or negative)")
	}
	return &Store{
		sched: s, trace: s.trace, cfg: cfg,
		latRand: r.Split("latency"), lagRand: r.Split("lag"),
		faultRand: r.Split("faults"), idRand: r.Split("ids"),
		entries: make(map[string]*entry), uploads: make(map[string]*upload),
		purgeAt: purgeMin,
	}
}

// Client returns the object-store port of one incarnation.
func (s *Store) Client(inc *Incarnation) engine.ObjectStore {
	if inc.sched != s.sched {
		panic("sim: Store.Client: incarnation of another scheduler")
	}
	return &storeClient{s: s, inc: inc}
}

// SetFaults replaces the fault injector (nil: none), e.g. to heal the
// world for the quiet phase. Requests already issued keep their outcome.
func (s *Store) SetFaults(f StoreFaults) { s.cfg.Faults = f }

// Object returns the current body at key (the truth, not a listing). The
// slice is the store's: do not modify it (bodies are never modified in
// place, so it stays valid).
func (s *Store) Object(key string) (body []byte, ok bool) {
	e := s.entries[key]
	if e == nil || !e.present {
		return nil, false
	}
	return e.body, true
}

// Info returns the current metadata of key (the truth).
func (s *Store) Info(key string) (engine.ObjectInfo, bool) {
	e := s.entries[key]
	if e == nil || !e.present {
		return engine.ObjectInfo{}, false
	}
	return e.info(key), true
}

// Keys returns every existing key under prefix, sorted (the truth).
func (s *Store) Keys(prefix string) []string {
	var out []string
	for i := s.keyIndex(prefix); i < len(s.keys) && strings.HasPrefix(s.keys[i], prefix); i++ {
		if s.entries[s.keys[i]].present {
			out = append(out, s.keys[i])
		}
	}
	return out
}

// Uploads returns every multipart upload in progress, ordered by key then
// upload id (the truth).
func (s *Store) Uploads() []engine.Upload {
	var out []engine.Upload
	for _, u := range s.uploadOrder {
		if u.active {
			out = append(out, u.info())
		}
	}
	return out
}

// Counts returns the counters of op.
func (s *Store) Counts(op Op) OpCounts { return s.counts[op] }

// IssuedBy returns how many requests of each op inc issued.
func (s *Store) IssuedBy(inc *Incarnation) [NumOps]uint64 {
	if i := int(inc.id - 1); i < len(s.issuedBy) {
		return s.issuedBy[i]
	}
	return [NumOps]uint64{}
}
