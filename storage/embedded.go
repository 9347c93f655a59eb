package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3bolt"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// The embedded object store is what the daemon uses when nothing is
// configured: gofakes3 over its bolt backend (one file under DATA_DIR),
// served on a loopback port by an http.Server in this process. The engine
// reaches it through the real aws-sdk-go-v2 client and S3Store, exactly as
// it reaches AWS, so a laptop run exercises the production code path
// (signing, XML, multipart, conditional PUTs, error mapping) and nothing
// is special-cased.
//
// Durability: bolt commits every write transaction with fsync before
// gofakes3 answers, so a PUT or a completed multipart upload that was
// answered 200 survives a crash of the process or the machine, which is
// what the WAL's "committed" needs. Multipart uploads in progress live in
// gofakes3's memory and die with the process; the engine treats them like
// any orphan upload.
//
// Exclusivity: bolt takes an exclusive flock on its file, so a second
// daemon on the same DATA_DIR fails at start (after embeddedLockWait)
// instead of serving the same WAL twice.
//
// Exposure: the listener is bound to 127.0.0.1 and gofakes3 does not check
// signatures, so any local user could read or write the WAL while the
// daemon runs — the same trust as the DATA_DIR files themselves. It is a
// single-user development store; production uses WAL_STORAGE=s3.

const (
	// embeddedLockWait bounds the wait for bolt's file lock.
	embeddedLockWait = 2 * time.Second
	// embeddedShutdownWait bounds Close's wait for requests in flight.
	embeddedShutdownWait = 5 * time.Second
	embeddedFreshPoll    = 20 * time.Millisecond // Close re-checks request-less connections
	// embeddedHeaderTimeout bounds a client's request header (slowloris);
	// bodies are not bounded here, S3Store's request timeout bounds them.
	embeddedHeaderTimeout = 10 * time.Second
	// Static credentials for the loopback client. gofakes3 accepts any;
	// the SDK insists on some to sign with.
	embeddedAccessKeyID     = "SKIPPRDEMBEDDED"
	embeddedSecretAccessKey = "skipprd-embedded-secret"
	embeddedRegion          = "us-east-1"
)

// ErrEmbeddedLocked: another process holds the embedded store's file.
var ErrEmbeddedLocked = errors.New("storage: embedded store is in use by another process")

// ErrEmbeddedNoBucket: a store opened read-only lacks its bucket (a
// read-write one creates it).
var ErrEmbeddedNoBucket = errors.New("storage: no such bucket in the file (opened read-only, so not created)")

// EmbeddedS3 is a running embedded object store: one bucket in a bolt file,
// served over HTTP on a loopback port.
type EmbeddedS3 struct {
	endpoint string
	bucket   string
	db       *bolt.DB
	srv      *http.Server
	served   chan struct{} // closed when Serve has returned

	mu    sync.Mutex
	fresh map[net.Conn]struct{} // accepted connections that have sent no request yet

	closeOnce sync.Once
	closeErr  error
}

// StartEmbeddedS3 opens (or creates) the bolt file at path, creates bucket
// in it if missing, and serves it on 127.0.0.1 on a free port. logger
// receives the HTTP server's own errors; nil: slog.Default(). The caller
// must Close it.
func StartEmbeddedS3(path, bucket string, logger *slog.Logger) (*EmbeddedS3, error) {
	return openEmbedded(path, bucket, logger, false)
}

// StartEmbeddedS3ReadOnly serves an existing bolt file read-only: bolt
// opens it without write access (a shared lock, so it fails with
// ErrEmbeddedLocked while a daemon holds the file), every write request
// fails, and a bucket missing from it is an error, not created. For
// readers that must change nothing (skipprd inspect, the start-up
// check).
func StartEmbeddedS3ReadOnly(path, bucket string, logger *slog.Logger) (*EmbeddedS3, error) {
	return openEmbedded(path, bucket, logger, true)
}

func openEmbedded(path, bucket string, logger *slog.Logger, readOnly bool) (*EmbeddedS3, error) {
	if logger == nil {
		logger = slog.Default()
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: embeddedLockWait, ReadOnly: readOnly})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (is another skipprd running on this DATA_DIR?)", ErrEmbeddedLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("storage: embedded store %s: %w", path, err)
	}
	backend := s3bolt.New(db)
	if err := ensureBucket(backend, bucket, readOnly); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("storage: embedded store %s: bucket %q: %w", path, bucket, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("storage: embedded store: listen on loopback: %w", err)
	}
	e := &EmbeddedS3{
		endpoint: "http://" + ln.Addr().String(),
		bucket:   bucket,
		db:       db,
		srv: &http.Server{
			Handler:           gofakes3.New(newBoltBackend(backend)).Server(),
			ReadHeaderTimeout: embeddedHeaderTimeout,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
		served: make(chan struct{}),
		fresh:  map[net.Conn]struct{}{},
	}
	e.srv.ConnState = e.trackFresh
	go func() {
		defer close(e.served)
		if err := e.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("embedded store stopped serving", "endpoint", e.endpoint, "err", err)
		}
	}()
	return e, nil
}

// ensureBucket creates bucket if it is missing; read-only, a missing
// bucket is an error.
func ensureBucket(b *s3bolt.Backend, bucket string, readOnly bool) error {
	exists, err := b.BucketExists(bucket)
	if err != nil || exists {
		return err
	}
	if readOnly {
		return ErrEmbeddedNoBucket
	}
	return b.CreateBucket(bucket)
}

// Endpoint is the store's base URL (http://127.0.0.1:port).
func (e *EmbeddedS3) Endpoint() string { return e.endpoint }

// Bucket is the bucket the store was started with.
func (e *EmbeddedS3) Bucket() string { return e.bucket }

// Client returns an SDK client for the store (NewLoopbackS3Client).
func (e *EmbeddedS3) Client() *s3.Client { return NewLoopbackS3Client(e.endpoint) }

// Close stops serving — waiting up to embeddedShutdownWait for requests
// in flight, then cutting them off — and closes the bolt file. Call it
// after the host using the store has stopped. Calling it again returns
// the first call's result.
//
// Connections that have sent no request are closed at once: nothing is
// lost (the host has stopped, so no request is coming on them), while
// net/http's Shutdown would wait 5 s for each before counting it idle —
// and an HTTP client can hold such a connection, dialed for a request
// that was cancelled meanwhile.
func (e *EmbeddedS3) Close() error {
	e.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), embeddedShutdownWait)
		defer cancel()
		shut := make(chan error, 1)
		go func() { shut <- e.srv.Shutdown(ctx) }()
		shutdownErr := e.closeFreshUntil(shut)
		if shutdownErr != nil {
			_ = e.srv.Close()
		}
		<-e.served
		// bolt's Close waits for a write transaction a cut-off handler may
		// still be in, so the file is never closed mid-commit.
		if err := e.db.Close(); err != nil {
			e.closeErr = fmt.Errorf("storage: embedded store: close: %w", err)
		} else if shutdownErr != nil {
			e.closeErr = fmt.Errorf("storage: embedded store: shutdown: %w", shutdownErr)
		}
	})
	return e.closeErr
}

// closeFreshUntil closes request-less connections until Shutdown returns
// (one may still be accepted just after it began), and returns its error.
func (e *EmbeddedS3) closeFreshUntil(shut <-chan error) error {
	tick := time.NewTicker(embeddedFreshPoll)
	defer tick.Stop()
	for {
		e.mu.Lock()
		for c := range e.fresh {
			_ = c.Close()
		}
		e.mu.Unlock()
		select {
		case err := <-shut:
			return err
		case <-tick.C:
		}
	}
}

// trackFresh is the server's ConnState hook.
func (e *EmbeddedS3) trackFresh(c net.Conn, s http.ConnState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s == http.StateNew {
		e.fresh[c] = struct{}{}
	} else {
		delete(e.fresh, c)
	}
}

// freshConns counts request-less connections (for tests).
func (e *EmbeddedS3) freshConns() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.fresh)
}

// NewLoopbackS3Client is the SDK client for an S3-compatible store on
// loopback, as docs/DESIGN.md §12 prescribes for gofakes3: path-style addressing
// (there is no DNS for bucket.127.0.0.1), WhenRequired checksums (over
// plain HTTP the SDK's default would frame bodies as aws-chunked, which
// gofakes3 stores verbatim) and static credentials. It reads nothing from
// the environment, so AWS variables meant for a real bucket cannot point
// the embedded WAL elsewhere.
func NewLoopbackS3Client(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region:                     embeddedRegion,
		BaseEndpoint:               aws.String(endpoint),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(embeddedAccessKeyID, embeddedSecretAccessKey, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}
