package objects

import (
	"context"
	"errors"
	"time"
)

// dispatcher is one pass: it walks the listing in key order and hands
// each object that is not done to a task, at most InFlight at once.
type dispatcher struct {
	s       *Source
	ctx     context.Context
	ingest  IngestFunc
	tasks   Tasks
	running int
	started int  // objects handed to tasks
	cut     bool // the pass ended at lineMax, before the listing's end
}

// list walks the pages of the listing after after. A listing error is
// logged and ends the pass: the next poll lists again.
func (d *dispatcher) list(after string) error {
	s := d.s
	for {
		pageAt := s.cfg.Now() // before the request: the page shows at least what was visible then
		page, err := s.store.List(d.ctx, after)
		if err != nil && s.cfg.Once && d.ctx.Err() == nil {
			return &OnceStoreError{Source: s.cfg.Name, After: after, Err: err}
		}
		if err != nil {
			if d.ctx.Err() == nil {
				s.cfg.Logger.Warn("objects source: listing failed; retrying at the next poll", "source", s.cfg.Name,
					"after", after, "retry_in", s.cfg.Poll, "error", err)
			}
			return nil
		}
		if err := d.page(page, after, pageAt); err != nil {
			return err
		}
		s.advanceFloor()
		if page.Next == "" {
			return nil
		}
		if s.cfg.Order == OrderKeys && !s.cfg.Once && len(s.line.items) >= lineMax {
			d.cut = true // list again from the floor (floorline.go)
			return nil
		}
		after = page.Next
	}
}

// page dispatches one page's objects.
func (d *dispatcher) page(page Page, after string, pageAt time.Time) error {
	s := d.s
	prev := after
	for _, o := range page.Objects {
		if o.Key <= prev {
			return invariantf("the store listed %q after %q: keys must ascend", o.Key, prev)
		}
		prev = o.Key
		if d.ctx.Err() != nil {
			return errStopped
		}
		if s.cfg.Order == OrderKeys && !s.cfg.Once { // once, the floor cannot rise (once.go)
			s.line.add(o, pageAt)
		}
		if s.finished(o) {
			continue
		}
		if err := d.start(o); err != nil {
			return err
		}
	}
	if page.Next != "" && page.Next < prev {
		return invariantf("the store's page ends at %q, before its last key %q", page.Next, prev)
	}
	return nil
}

// start hands o to a task once one of the InFlight is free.
func (d *dispatcher) start(o Object) error {
	for d.running >= d.s.cfg.InFlight {
		if err := d.wait(); err != nil {
			return err
		}
	}
	d.running++
	d.started++
	if d.s.cfg.Once {
		d.s.onceStarted = append(d.s.onceStarted, o)
	}
	d.tasks.Go(func() {
		// errStopped: the Run stops for another reason, already known.
		if err := d.s.object(d.ctx, d.ingest, o); err != nil && !errors.Is(err, errStopped) {
			d.s.prog.failed(err, o.Key)
		}
	})
	return nil
}

// wait waits for a task to end; it returns the first error a task
// stopped with.
func (d *dispatcher) wait() error {
	d.tasks.Wait()
	d.running--
	d.s.advanceFloor()
	return d.s.prog.firstErr()
}

// drain waits for every running task.
func (d *dispatcher) drain() error {
	for d.running > 0 {
		d.wait() //nolint:errcheck // reported below, once all ended
	}
	return d.s.prog.firstErr()
}
