package postgrescdc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skipprd/skipprd/internal/pgurl"
)

// sessionParams are the settings of both connections. Values travel in
// text form, and the snapshot and the stream must print a value alike
// (a row's identity is made of text forms), in forms types.go reads.
var sessionParams = map[string]string{
	"application_name":   "skipprd-pgcdc",
	"client_encoding":    "UTF8",
	"DateStyle":          "ISO, YMD",
	"TimeZone":           "UTC",
	"IntervalStyle":      "postgres",
	"bytea_output":       "hex",
	"extra_float_digits": "1",
}

// connectTimeout bounds one connection attempt.
const connectTimeout = 15 * time.Second

// session is one connection to the server, from setup to the end of
// streaming: a plain connection for the catalog and the snapshot, a
// replication connection for the slot and the stream.
type session struct {
	src    *Source
	ingest IngestFunc
	conn   *pgx.Conn
	repl   *pgconn.PgConn
	tables []*table
	byOID  map[uint32]*table
	slot   slotState
	// statusEvery: the longest time between two status updates.
	statusEvery time.Duration
}

// openSession connects and sets up: server settings, publication,
// tables, slot.
func (s *Source) openSession(ctx context.Context, ingest IngestFunc) (*session, error) {
	conn, err := connect(ctx, s.cfg)
	if err != nil {
		return nil, err
	}
	sess := &session{src: s, ingest: ingest, conn: conn, byOID: map[uint32]*table{}}
	if err := sess.setup(ctx); err != nil {
		sess.close()
		return nil, err
	}
	return sess, nil
}

func (sess *session) setup(ctx context.Context) error {
	cfg := sess.src.cfg
	if err := checkServer(ctx, sess.conn); err != nil {
		return err
	}
	if err := ensurePublication(ctx, sess.conn, cfg.Publication, cfg.Tables); err != nil {
		return err
	}
	names, err := capturedTables(ctx, sess.conn, cfg.Publication, cfg.Tables)
	if err != nil {
		return err
	}
	for _, n := range names {
		ct, err := readTable(ctx, sess.conn, cfg.Publication, n)
		if err != nil {
			return err
		}
		t := sess.src.newTable(ct)
		sess.tables = append(sess.tables, t)
		sess.byOID[ct.oid] = t
	}
	if sess.statusEvery, err = statusInterval(ctx, sess.conn, cfg.StatusInterval); err != nil {
		return err
	}
	if sess.repl, err = connectReplication(ctx, cfg); err != nil {
		return err
	}
	sess.slot, err = ensureSlot(ctx, sess.conn, sess.repl, cfg.Slot, len(sess.src.pos) > 0)
	return err
}

func (sess *session) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if sess.repl != nil {
		_ = sess.repl.Close(ctx)
	}
	_ = sess.conn.Close(ctx)
}

// statusInterval is cfg's interval, lowered to a quarter of the
// server's wal_sender_timeout: a walsender that hears nothing for that
// long ends the connection.
func statusInterval(ctx context.Context, conn *pgx.Conn, cfg time.Duration) (time.Duration, error) {
	var ms int64
	if err := conn.QueryRow(ctx, "SELECT setting::int8 FROM pg_settings WHERE name = 'wal_sender_timeout'").Scan(&ms); err != nil {
		return 0, fmt.Errorf("read wal_sender_timeout: %w", err)
	}
	if ms > 0 {
		cfg = min(cfg, time.Duration(ms)*time.Millisecond/4)
	}
	return max(cfg, 100*time.Millisecond), nil
}

// connect opens the plain connection.
func connect(ctx context.Context, cfg Config) (*pgx.Conn, error) {
	cc, err := pgx.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: the URL does not parse: %s", ErrSetup, pgurl.Scrub(err.Error(), cfg.URL))
	}
	withParams(&cc.Config, cfg)
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return conn, nil
}

// connectReplication opens a logical replication connection.
func connectReplication(ctx context.Context, cfg Config) (*pgconn.PgConn, error) {
	pc, err := pgconn.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: the URL does not parse: %s", ErrSetup, pgurl.Scrub(err.Error(), cfg.URL))
	}
	withParams(pc, cfg)
	pc.RuntimeParams["replication"] = "database"
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect for replication: %w", err)
	}
	return conn, nil
}

// withParams sets sessionParams and bounds every message the server may
// send: a row (old and new) and the protocol's own framing.
func withParams(pc *pgconn.Config, cfg Config) {
	for k, v := range sessionParams {
		if k == "application_name" && pc.RuntimeParams[k] != "" {
			continue // the URL names the application
		}
		pc.RuntimeParams[k] = v
	}
	pc.MaxProtocolMessageBodyLen = cfg.MessageBytesMax
}
