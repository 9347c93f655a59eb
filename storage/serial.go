package storage

import "sync"

// serialQueue runs jobs one at a time in submission order, on a goroutine
// that exists only while there is work. It is how one File's calls
// complete in call order (the File contract) while different files'
// calls, and the loop, proceed in parallel. Unbounded for the same reason
// as Loop: the engine bounds what it has in flight, and submitting must
// never block the loop.
type serialQueue struct {
	mu sync.Mutex
	// INVARIANT: running is true exactly while a drain goroutine owns the
	// queue; jobs[0] is the next job to run.
	jobs    []func()
	running bool
}

// submit queues job behind every job submitted before it.
func (q *serialQueue) submit(job func()) {
	q.mu.Lock()
	q.jobs = append(q.jobs, job)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.drain()
	}
}

// drain runs jobs until the queue is empty, then exits. The mutex hands
// each job's writes to the next, so jobs may share state without locks
// even when consecutive jobs run on different drain goroutines.
func (q *serialQueue) drain() {
	for {
		q.mu.Lock()
		if len(q.jobs) == 0 {
			q.running = false
			q.jobs = nil
			q.mu.Unlock()
			return
		}
		job := q.jobs[0]
		q.jobs[0] = nil
		q.jobs = q.jobs[1:]
		q.mu.Unlock()
		job()
	}
}
