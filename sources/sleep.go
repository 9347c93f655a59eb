package sources

import (
	"context"
	"time"
)

// Sleep waits d or until ctx ends (then it returns ctx.Err()): a source's
// backoff that a stop cuts short.
func Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
