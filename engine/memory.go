package engine

// One memory pool, no knobs (docs/DESIGN.md §10): 70% of what the machine can
// give (the Memory port), split between ingest admission and the segment
// body cache, each within its floor and ceiling, together never more than
// the pool. On a machine too small for both floors the split degrades
// inside the pool instead of growing past it.

const (
	poolPercent        = 70
	admissionMin       = 256 << 20
	admissionMax       = 64 << 30
	cacheMin           = 32 << 20
	cacheMax           = 16 << 30
	defaultMemoryHint  = 1 << 30
	degradedAdmitShare = 80 // percent of a tiny pool that goes to admission
)

// budget is the pool's split.
//
// INVARIANT: admission + cache ≤ pool (checkBudget, in refreshBudget).
type budget struct {
	pool, admission, cache int64
}

// splitPool sizes the pool from the available-memory hint.
func splitPool(available int64) budget {
	pool := max(available, 0) / 100 * poolPercent
	admission := min(max(pool/2, admissionMin), admissionMax)
	cache := min(max(pool-admission, cacheMin), cacheMax)
	if admission+cache > pool {
		admission = pool / 100 * degradedAdmitShare
		cache = pool - admission
	}
	return budget{pool: pool, admission: admission, cache: cache}
}

// memoryHint reads the Memory port (a fixed hint when there is none).
func (e *Engine) memoryHint() int64 {
	if e.p.Memory == nil {
		return defaultMemoryHint
	}
	return e.p.Memory.AvailableBytes()
}

// refreshBudget re-reads the hint and resizes admission and the cache.
// Shrinking never drops held data: admission refuses new units until the
// held bytes fall under the new budget, and the cache evicts what is not
// pinned.
func (e *Engine) refreshBudget() {
	e.budget = splitPool(e.memoryHint())
	e.checkBudget()
	e.cache.resize(e.budget.cache)
}
