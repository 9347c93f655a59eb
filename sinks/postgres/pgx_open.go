package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipprd/skipprd/internal/pgurl"
)

// PGX is the DB of a real PostgreSQL server, through pgx: a bounded pool
// of connections to one database, writing to one schema. It is safe for
// concurrent use; each Apply uses one connection.
type PGX struct {
	pool   *pgxpool.Pool
	schema string // INVARIANT: a valid name (nameProblem), existing at open
}

// PGXOptions configure OpenPGX.
type PGXOptions struct {
	// MaxConns bounds the open connections, 1 to PGXConnsMax. The daemon
	// passes engine.Config.CompactionConcurrency+1: one per job in flight
	// and one for the lookups that settle ambiguous commits.
	MaxConns int32
	// Schema is where the job tables and the applied-jobs table live
	// ("" means "public"). It must exist.
	Schema string
}

// PGXConnsMax bounds PGXOptions.MaxConns; a server's max_connections is
// usually 100, and the engine never runs this many jobs at once.
const PGXConnsMax = 256

// Session settings that bound how long a transaction whose client
// vanished keeps a job's applied-jobs key — stalling the job's replay and
// its lookup (Applied waits for it). The sink never leaves a transaction
// idle, so idle_in_transaction_session_timeout ends only such orphans;
// the server's TCP keepalives (every serverKeepalive, dropped after
// serverKeepaliveCount silent probes) find a client gone mid-COPY, which
// the operating system's defaults would take hours to notice.
const (
	idleInTxTimeout      = time.Minute
	serverKeepalive      = 15 * time.Second
	serverKeepaliveCount = 4
)

// OpenPGX connects to the database at rawURL, checks the connection and
// the schema, and creates the applied-jobs table if it is missing. Its
// errors never show the URL's password.
func OpenPGX(ctx context.Context, rawURL string, opts PGXOptions) (*PGX, error) {
	redacted := pgurl.Redact(rawURL)
	if opts.MaxConns < 1 || opts.MaxConns > PGXConnsMax {
		return nil, fmt.Errorf("postgres: MaxConns %d, want 1 to %d", opts.MaxConns, PGXConnsMax)
	}
	if opts.Schema == "" {
		opts.Schema = "public"
	}
	if why := nameProblem(opts.Schema); why != "" {
		return nil, fmt.Errorf("postgres: schema %q: a schema name %s", opts.Schema, why)
	}
	pool, err := newPool(rawURL, configure, opts.MaxConns)
	if err != nil {
		return nil, fmt.Errorf("postgres: the URL %s does not parse (%s)", redacted, pgurl.Scrub(err.Error(), rawURL))
	}
	p := &PGX{pool: pool, schema: opts.Schema}
	if err := p.prepare(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("postgres: %s: %s", redacted, pgurl.Scrub(err.Error(), rawURL))
	}
	return p, nil
}

// configure sets what every session of the sink relies on.
func configure(c *pgx.ConnConfig) {
	// Exec mode: no statement cache. A cached description of a table (or
	// of the CDC staging table, recreated in each transaction with the
	// job's types) could go stale, and COPY would then encode values for
	// the wrong column types; pgx describes the target on every COPY
	// instead (one round trip per job).
	c.DefaultQueryExecMode = pgx.QueryExecModeExec
	if c.RuntimeParams == nil {
		c.RuntimeParams = map[string]string{}
	}
	if c.RuntimeParams["application_name"] == "" {
		c.RuntimeParams["application_name"] = "skipprd"
	}
	c.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(idleInTxTimeout.Milliseconds())
	c.RuntimeParams["tcp_keepalives_idle"] = fmt.Sprint(int(serverKeepalive.Seconds()))
	c.RuntimeParams["tcp_keepalives_interval"] = fmt.Sprint(int(serverKeepalive.Seconds()))
	c.RuntimeParams["tcp_keepalives_count"] = fmt.Sprint(serverKeepaliveCount)
}

// prepare checks the server (UTF8 database, the schema exists) and
// creates the applied-jobs table.
func (p *PGX) prepare(ctx context.Context) error {
	pc, err := p.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer pc.Release()
	conn := pc.Conn()
	var encoding string
	var schemaExists bool
	err = conn.QueryRow(ctx, "SELECT current_setting('server_encoding'), EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", p.schema).Scan(&encoding, &schemaExists)
	switch {
	case err != nil:
		return fmt.Errorf("checking the server: %w", err)
	case encoding != "UTF8":
		return fmt.Errorf("the database's encoding is %s; the sink needs UTF8 (text and jsonb values are UTF-8)", encoding)
	case !schemaExists:
		return fmt.Errorf("schema %q does not exist; create it or choose another", p.schema)
	}
	return p.createAppliedJobs(ctx, conn)
}

// createAppliedJobs creates the applied-jobs table if it is missing, and
// adds the columns a table of an older build lacks (content, pipeline,
// wal_id: NULL in its old rows), under the table's DDL lock (CREATE
// TABLE IF NOT EXISTS races with itself). The ALTER runs only when a
// column is missing: it takes the table's ACCESS EXCLUSIVE lock, which
// would wait for — and stall — the jobs in flight of every sink sharing
// the table.
func (p *PGX) createAppliedJobs(ctx context.Context, conn *pgx.Conn) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := lockTable(ctx, tx, p.schema, AppliedJobsTable); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+p.ident(AppliedJobsTable)+` (
			compaction_id text PRIMARY KEY,
			table_name text NOT NULL,
			rows bigint NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now(),
			content text,
			pipeline text,
			wal_id text)`)
		if err != nil {
			return fmt.Errorf("creating %s: %w", AppliedJobsTable, err)
		}
		var missing int
		err = tx.QueryRow(ctx, `SELECT count(*) FROM unnest($1::text[]) AS want(name)
			WHERE NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = $2::regclass AND attname = want.name AND attnum > 0 AND NOT attisdropped)`,
			appliedJobsAddedColumns, p.ident(AppliedJobsTable)).Scan(&missing)
		if err != nil {
			return fmt.Errorf("reading the columns of %s: %w", AppliedJobsTable, err)
		}
		if missing == 0 {
			return nil
		}
		alter := `ALTER TABLE ` + p.ident(AppliedJobsTable)
		for i, c := range appliedJobsAddedColumns {
			if i > 0 {
				alter += ","
			}
			alter += ` ADD COLUMN IF NOT EXISTS ` + pgx.Identifier{c}.Sanitize() + ` text`
		}
		if _, err := tx.Exec(ctx, alter); err != nil {
			return fmt.Errorf("adding %v to %s: %w", appliedJobsAddedColumns, AppliedJobsTable, err)
		}
		return nil
	})
}

// appliedJobsAddedColumns are the applied-jobs columns older builds did
// not create (all text, NULL in their rows).
var appliedJobsAddedColumns = []string{"content", "pipeline", "wal_id"}

// Close closes the connections. Applies in flight finish first on theirs.
func (p *PGX) Close() { p.pool.Close() }

// ident quotes table in the sink's schema.
func (p *PGX) ident(table string) string {
	return pgx.Identifier{p.schema, table}.Sanitize()
}
