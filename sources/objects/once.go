package objects

import "fmt"

// With Config.Once a Run is one pass: the store is listed once, page by
// page to its end, and every object of that listing that is not done is
// ingested; Run then returns nil. Each task awaits the answer of every
// unit it hands over, and the pass returns once every task has ended,
// so by then everything handed over is acked — a daemon may close its
// host and apply it all. Objects that appear while the pass lists may
// be in it or not; the next Run finds those it missed, and skips what
// this one finished, by the offsets.
//
// Nothing is retried at a later poll, as there is none: a listing or
// read error of the store ends Run with an *OnceStoreError (the next Run
// resumes every object from its acked position), as does an object that
// fails with OnError "stop"; one skipped with "skip" is logged and
// counted.
//
// The pass is never cut at lineMax, and with Order "keys" the floor
// cannot rise during it: it rises over an object only in a listing made
// Settle after the object was first listed, and a once pass lists each
// object once. So a once Run keeps every object's offset key, as Order
// "any" does; the floor left by earlier runs that were not once still
// holds (listings start after it, units carry it).

// onceOver ends a once Run after its pass, which ended without an error:
// every object it handed to a task must be finished.
func (s *Source) onceOver(cut bool) error {
	if cut {
		return invariantf("source %q: a once pass was cut at %d objects; it must walk its listing to the end", s.cfg.Name, lineMax)
	}
	for _, o := range s.onceStarted {
		if !s.finished(o) {
			return invariantf("source %q: a once pass ended with object %q (%d bytes) not finished, at offset %d",
				s.cfg.Name, o.Key, o.Size, s.prog.get(s.OffsetKey(o.Key)))
		}
	}
	st := s.Stats()
	s.cfg.Logger.Info("objects source: once: every object of the listing at start is ingested and acked", "source", s.cfg.Name,
		"objects_ingested", len(s.onceStarted), "objects_skipped", st.ObjectsSkipped, "rows_acked", st.RowsAcked)
	return nil
}

// OnceStoreError is a listing or read error of the store that ended a
// once Run: there is no next poll to retry it at. The next Run lists
// again and resumes every object from its acked position.
type OnceStoreError struct {
	Source string
	Object string // the object being read; "" for a listing
	After  string // a listing: the key it listed after ("": from the first)
	Err    error
}

func (e *OnceStoreError) Error() string {
	if e.Object == "" {
		return fmt.Sprintf("objects source %q: listing after %q failed, and a once run does not list again (the next run does): %v",
			e.Source, e.After, e.Err)
	}
	return fmt.Sprintf("objects source %q: object %q: reading failed, and a once run does not retry (the next run resumes it from its acked position): %v",
		e.Source, e.Object, e.Err)
}

func (e *OnceStoreError) Unwrap() error { return e.Err }
