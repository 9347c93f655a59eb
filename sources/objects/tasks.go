package objects

// Tasks runs the tasks that ingest objects at once (Config.InFlight):
// goroutines in production (nil Config.Tasks), the simulator's
// coroutines in its world. Only the tasks' own calls — reads, ingests,
// sleeps — block; a task's end is learnt through Wait.
type Tasks interface {
	// Go starts fn.
	Go(fn func())
	// Wait blocks until a task started by Go has ended; each ended task
	// answers one Wait, whether it ended before the call or during it.
	Wait()
}

// goTasks runs tasks as goroutines.
type goTasks struct{ ended chan struct{} }

// newGoTasks returns Tasks for at most n tasks running at once.
func newGoTasks(n int) *goTasks { return &goTasks{ended: make(chan struct{}, n)} }

func (t *goTasks) Go(fn func()) {
	go func() {
		defer func() { t.ended <- struct{}{} }()
		fn()
	}()
}

func (t *goTasks) Wait() { <-t.ended }
