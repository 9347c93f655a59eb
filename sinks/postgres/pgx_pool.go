package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// newPool returns a pgxpool of at most connsMax connections made with
// config. pgxpool destroys on release a connection that broke or is still
// inside a transaction, and pings one idle for more than a second before
// handing it out, so a connection the server or the network dropped
// meanwhile is replaced instead of failing the next transaction. It dials
// nothing until the first Acquire.
func newPool(rawURL string, configure func(*pgx.ConnConfig), connsMax int32) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, err
	}
	configure(pc.ConnConfig)
	pc.MaxConns, pc.MinConns = connsMax, 0
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: pool: %w", err)
	}
	return pool, nil
}
