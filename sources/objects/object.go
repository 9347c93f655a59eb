package objects

import (
	"context"
	"errors"
)

// object ingests o unless its offset marks it done, and settles what
// happened. It returns nil to go on to the next object.
func (s *Source) object(ctx context.Context, ingest IngestFunc, o Object) error {
	if o.Size == 0 {
		return nil // nothing to ingest: done from the start
	}
	f, err := formatOf(s.cfg.Format, o.Key)
	if err != nil {
		return s.failed(&ObjectError{Source: s.cfg.Name, Object: o.Key, Offset: -1, RowGroup: -1, Reason: err.Error()})
	}
	key := s.OffsetKey(o.Key)
	value := s.prog.get(key)
	if done(f, value, o.Size) {
		return nil // not opened
	}
	if f == parquetFile {
		err = s.ingestParquet(ctx, ingest, o, key, int(value))
	} else {
		err = s.ingestText(ctx, ingest, o, key, f, int64(value))
	}
	return s.settle(ctx, o, f, key, err)
}

// settle acts on how ingesting o ended.
func (s *Source) settle(ctx context.Context, o Object, f format, key string, err error) error {
	var oe *ObjectError
	var se *storeError
	switch {
	case err == nil:
		// An object is done only once all its rows are acked: its offset,
		// which only an ack advances, must say so.
		if v := s.prog.get(key); !done(f, v, o.Size) {
			return invariantf("object %q ended at offset %d of %s %q, which does not mark it done (size %d)", o.Key, v, f, key, o.Size)
		}
		s.objectsDone.Add(1)
		s.cfg.Logger.Info("objects source: object ingested", "source", s.cfg.Name, "object", o.Key, "bytes", o.Size)
	case errors.Is(err, errNoRows):
		s.prog.settle(o.Key)
		s.objectsDone.Add(1)
		s.cfg.Logger.Info("objects source: object has no rows left to ingest", "source", s.cfg.Name, "object", o.Key, "bytes", o.Size)
	case errors.As(err, &oe):
		return s.failed(oe)
	case errors.Is(err, errStopped) || ctx.Err() != nil:
		return errStopped
	case errors.As(err, &se) && s.cfg.Once:
		return &OnceStoreError{Source: s.cfg.Name, Object: o.Key, Err: err}
	case errors.As(err, &se):
		s.cfg.Logger.Warn("objects source: reading an object failed; retrying at the next poll from its acked position",
			"source", s.cfg.Name, "object", o.Key, "retry_in", s.cfg.Poll, "error", err)
	default:
		return err // the host refuses every unit, or an invariant broke
	}
	return nil
}

// failed acts on an object that cannot be ingested: Run returns the
// error (OnError "stop"), or it is logged and passed over for the rest
// of this Run (OnError "skip"). A skipped object has no unit to mark it
// done, so a restart reports it again: it is never dropped silently.
func (s *Source) failed(oe *ObjectError) error {
	if s.cfg.OnError == OnErrorStop {
		return oe
	}
	s.cfg.Logger.Error("objects source: object skipped; a restart will report it again", "source", s.cfg.Name,
		"object", oe.Object, "error", oe)
	s.objectsSkipped.Add(1)
	s.prog.settle(oe.Object)
	return nil
}
