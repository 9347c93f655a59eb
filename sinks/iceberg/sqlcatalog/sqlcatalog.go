package sqlcatalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	icego "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	icegoio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the s3:// file IO
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/utils"
	"github.com/aws/aws-sdk-go-v2/aws"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/skipprd/skipprd/sinks/iceberg"
)

// DefaultName is the catalog name rows are stored under when Config.Name
// is empty.
const DefaultName = "skipprd"

// sqliteBusyTimeoutMs is how long a SQLite connection waits for another
// connection's write transaction before giving up with "database is
// locked". Commits hold the lock for one UPDATE, so this is generous.
const sqliteBusyTimeoutMs = 30000

// Config says where the catalog's rows and the tables' files live.
type Config struct {
	// URI names the catalog database: postgres://… or postgresql://… for
	// PostgreSQL, sqlite:///abs/path/catalog.db or a file path ending in
	// .db for SQLite.
	URI string
	// Name is the catalog name every row is stored under; DefaultName if
	// empty. Two Catalogs see the same tables only with the same Name.
	Name string
	// Warehouse is the root new tables are created under: file:///abs/path
	// or an absolute path for a local folder, s3://bucket/prefix for S3.
	// A table's location is {Warehouse}/{namespace}/{table}.
	Warehouse string
	// AWS is the configuration iceberg-go's S3 file IO uses for an s3://
	// warehouse (credentials, region, retries, checksums); nil: the SDK's
	// default chain from the environment.
	AWS *aws.Config
	// S3PathStyle addresses buckets by path (endpoint/bucket/key) instead
	// of by virtual host; S3-compatible servers usually want it.
	S3PathStyle bool
	// S3Endpoint overrides the S3 endpoint URL; empty: AWS's.
	S3Endpoint string
}

// Catalog is the iceberg.Catalog of the sink on iceberg-go's SQL catalog.
// It is safe for concurrent use.
type Catalog struct {
	cfg       Config
	warehouse string
	awsCfg    *aws.Config
	db        *sql.DB
	cat       *sqlcat.Catalog
	// props are the catalog properties iceberg-go's file IO is loaded with.
	props icego.Properties

	mu    sync.Mutex
	metas metaCache
}

var _ iceberg.Catalog = (*Catalog)(nil)

// Open connects to the catalog database, creating iceberg-go's two
// catalog tables if they are missing.
func Open(ctx context.Context, cfg Config) (*Catalog, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	warehouse, err := normalizeWarehouse(cfg.Warehouse)
	if err != nil {
		return nil, err
	}
	db, dialect, err := openDB(ctx, cfg.URI)
	if err != nil {
		return nil, err
	}
	c := &Catalog{cfg: cfg, warehouse: warehouse, awsCfg: cfg.AWS, db: db}
	c.props = c.catalogProps()
	if c.cat, err = newSQLCatalog(ctx, cfg.Name, db, dialect, c.props); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlcatalog: open %s: %w", redact(cfg.URI), err)
	}
	return c, nil
}

// newSQLCatalog makes iceberg-go's SQL catalog on db, which creates the
// catalog tables if they are missing. Processes doing that at once can
// trip PostgreSQL's CREATE TABLE IF NOT EXISTS (a duplicate key in
// pg_type); a later try finds the tables made.
func newSQLCatalog(ctx context.Context, name string, db *sql.DB, dialect sqlcat.SupportedDialect, props icego.Properties) (*sqlcat.Catalog, error) {
	for try := 1; ; try++ {
		cat, err := sqlcat.NewCatalog(name, db, dialect, props)
		if err == nil || try == 5 {
			return cat, err
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(try) * 20 * time.Millisecond):
		}
	}
}

// Close closes the database connections.
func (c *Catalog) Close() error {
	err := c.cat.Close()
	return errors.Join(err, c.db.Close())
}

// catalogProps are the properties iceberg-go loads every file IO with.
func (c *Catalog) catalogProps() icego.Properties {
	props := icego.Properties{"warehouse": c.warehouse}
	if !strings.HasPrefix(c.warehouse, "s3://") {
		return props
	}
	if c.cfg.S3Endpoint != "" {
		props[icegoio.S3EndpointURL] = c.cfg.S3Endpoint
	}
	props[icegoio.S3ForceVirtualAddressing] = strconv.FormatBool(!c.cfg.S3PathStyle)
	if c.awsCfg != nil && c.awsCfg.Region != "" {
		props[icegoio.S3Region] = c.awsCfg.Region
	}
	return props
}

// withAWS returns ctx carrying the AWS configuration iceberg-go's S3 IO
// reads from the context.
func (c *Catalog) withAWS(ctx context.Context) context.Context {
	if c.awsCfg == nil {
		return ctx
	}
	return utils.WithAwsConfig(ctx, c.awsCfg)
}

// location is the root of the table id: {warehouse}/{namespace}/{name}.
func (c *Catalog) location(id iceberg.Ident) string {
	return c.warehouse + "/" + id.Namespace + "/" + id.Name
}

// ident is id as iceberg-go names it.
func ident(id iceberg.Ident) table.Identifier {
	return table.Identifier{id.Namespace, id.Name}
}

// fsFunc loads the file IO for a location with the catalog's properties.
func (c *Catalog) fsFunc(location string) table.FSysF {
	return icegoio.LoadFSFunc(c.props, location)
}

// openDB opens the catalog database uri names.
func openDB(ctx context.Context, uri string) (*sql.DB, sqlcat.SupportedDialect, error) {
	var (
		db      *sql.DB
		dialect sqlcat.SupportedDialect
		err     error
	)
	switch {
	case strings.HasPrefix(uri, "postgres://"), strings.HasPrefix(uri, "postgresql://"):
		dialect = sqlcat.Postgres
		db, err = sql.Open("pgx", uri)
	case strings.HasPrefix(uri, "sqlite://"), strings.HasSuffix(uri, ".db"):
		dialect = sqlcat.SQLite
		var dsn string
		if dsn, err = sqliteDSN(uri); err == nil {
			db, err = sql.Open(sqliteshim.ShimName, dsn)
		}
	default:
		return nil, "", fmt.Errorf("sqlcatalog: catalog URI %q is neither postgres://… nor sqlite://…/*.db", redact(uri))
	}
	if err != nil {
		return nil, "", fmt.Errorf("sqlcatalog: open %s: %w", redact(uri), err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, "", fmt.Errorf("sqlcatalog: connect %s: %w", redact(uri), err)
	}
	return db, dialect, nil
}

// sqliteDSN is the modernc.org/sqlite DSN of a sqlite:// URI or .db path:
// WAL so readers never block the writer, synchronous=FULL so a committed
// row is on disk before the commit returns, a busy timeout so a writer
// waits for another instead of failing, and BEGIN IMMEDIATE for write
// transactions so two writers serialize on the write lock at BEGIN
// rather than one failing when it upgrades a read lock (which no busy
// timeout can save in WAL mode).
func sqliteDSN(uri string) (string, error) {
	path := strings.TrimPrefix(uri, "sqlite://")
	if strings.ContainsAny(path, "?#") {
		return "", fmt.Errorf("sqlcatalog: SQLite path %q must not contain ? or #", path)
	}
	if strings.HasPrefix(uri, "sqlite://") && !filepath.IsAbs(path) {
		return "", fmt.Errorf("sqlcatalog: SQLite URI %q must name an absolute path (sqlite:///abs/path.db)", uri)
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlcatalog: SQLite path %q: %w", path, err)
	}
	// These keys mean the same to modernc.org/sqlite and to
	// mattn/go-sqlite3, which sqliteshim picks on other platforms.
	q := url.Values{}
	q.Set("_busy_timeout", strconv.Itoa(sqliteBusyTimeoutMs))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_txlock", "immediate")
	return path + "?" + q.Encode(), nil
}

// normalizeWarehouse returns the warehouse as a URI without a trailing
// slash: an absolute path becomes file:///path.
func normalizeWarehouse(w string) (string, error) {
	switch {
	case strings.HasPrefix(w, "s3://"):
		u, err := url.Parse(w)
		if err != nil || u.Host == "" {
			return "", fmt.Errorf("sqlcatalog: warehouse %q: want s3://bucket/prefix", w)
		}
		return "s3://" + u.Host + strings.TrimRight(u.Path, "/"), nil
	case strings.HasPrefix(w, "file://"):
		u, err := url.Parse(w)
		if err != nil || (u.Host != "" && u.Host != "localhost") || !filepath.IsAbs(u.Path) {
			return "", fmt.Errorf("sqlcatalog: warehouse %q: want file:///absolute/path", w)
		}
		return "file://" + strings.TrimRight(filepath.Clean(u.Path), "/"), nil
	case filepath.IsAbs(w):
		return "file://" + strings.TrimRight(filepath.Clean(w), "/"), nil
	default:
		return "", fmt.Errorf("sqlcatalog: warehouse %q: want file:///abs/path, /abs/path or s3://bucket/prefix", w)
	}
}

// redact hides a password in a database URI.
func redact(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.User == nil {
		return uri
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// noTable reports whether err says the table (or its namespace) is missing.
func noTable(err error) bool {
	return errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace)
}
