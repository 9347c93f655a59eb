package postgrescdc

import (
	"errors"
	"fmt"
)

// ErrSetup: the server or the configuration must change before the
// source can run (wal_level, a table without a key, a table missing from
// an existing publication, a slot of another plugin). Run returns it.
var ErrSetup = errors.New("postgrescdc: setup")

// ErrStream: the change stream holds something the source cannot turn
// into rows without losing information (a TRUNCATE, an unchanged TOAST
// value without the old row, a value Arrow cannot hold). Run returns it;
// nothing from that transaction on is confirmed, so once the cause is
// dealt with (see the message) a restart resumes there.
var ErrStream = errors.New("postgrescdc: change stream")

// ErrInvariant: something the source relies on did not hold (the server
// sent positions out of order, a unit's offset did not advance). Run
// fails closed with it.
var ErrInvariant = errors.New("postgrescdc: invariant broken")

func setupf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSetup, fmt.Sprintf(format, args...))
}

func streamf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrStream, fmt.Sprintf(format, args...))
}

func invariantf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvariant, fmt.Sprintf(format, args...))
}

// errStopped: the context ended; Run returns nil.
var errStopped = errors.New("postgrescdc: stopped")

// errResync: the session must start again from setup (a table joined
// the publication); what was acked stays acked.
var errResync = errors.New("postgrescdc: tables changed")
