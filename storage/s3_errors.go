package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/skipprd/skipprd/engine"
)

// s3Error wraps an SDK error with the operation and key and, where the
// engine branches on it, the engine sentinel (both stay reachable through
// errors.Is / errors.As: the sentinel for the engine, the SDK error for
// humans reading logs).
func s3Error(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if sentinel := s3Sentinel(err); sentinel != nil {
		return fmt.Errorf("storage: s3 %s %q: %w: %w", op, key, sentinel, err)
	}
	return fmt.Errorf("storage: s3 %s %q: %w", op, key, err)
}

// s3Sentinel classifies an SDK error. The order matters:
//
//   - Error codes first, because one status can mean different things:
//     404 is NoSuchKey, NoSuchUpload or NoSuchBucket. A missing bucket must
//     never read as a missing key — recovery would conclude that a commit
//     marker is absent and re-commit its units (a double delivery). So
//     NoSuchBucket is engine.ErrRefused: definite, and no retry changes
//     it. (A HEAD has no
//     body, so a HEAD against a missing bucket is indistinguishable from a
//     missing key; S3Store.CheckBucket exists for the start-up check.)
//   - 503 means the store refused the request before doing it (SlowDown,
//     ServiceUnavailable): ErrThrottled, a definite "did not happen".
//   - Any other 5xx may come after the store acted: ErrAmbiguous.
//   - 401 and 403 (access denied, a bad key or signature, a clock too
//     far off) are engine.ErrRefused: definite, and no retry changes them
//     until an operator acts. Any other 4xx is a definite rejection: no
//     sentinel.
//   - A 2xx/3xx that still failed (an undecodable body, S3's "200 with an
//     error inside" on CompleteMultipartUpload) may have taken effect:
//     ErrAmbiguous.
//   - No connection at all — the dial failed (refused, no route, a name
//     that does not resolve) — is definite: nothing was sent. Telling it
//     apart matters: an ambiguous commit marker is settled only after the
//     store's request lifetime (35 s on S3), so a store that is simply
//     down would hold ingest that long after it is back.
//   - No response on a connection: a transport failure (timeout,
//     cancellation, reset) is ErrAmbiguous — we cannot tell whether the
//     request reached the store. Anything else without a response
//     (bad parameters, no credentials) failed before sending: definite.
func s3Sentinel(err error) error {
	code, status := apiErrorCode(err), httpStatus(err)
	switch {
	case code == "NoSuchUpload":
		return engine.ErrNoSuchUpload
	case code == "NoSuchBucket":
		return engine.ErrRefused
	case code == "NoSuchKey" || code == "NotFound" || status == 404:
		return engine.ErrNotFound
	case code == "PreconditionFailed" || status == 412:
		return engine.ErrPreconditionFailed
	case code == "SlowDown" || status == 503:
		return engine.ErrThrottled
	case status >= 500:
		return engine.ErrAmbiguous
	case status == 401 || status == 403:
		return engine.ErrRefused
	case status >= 400:
		return nil
	case status != 0:
		return engine.ErrAmbiguous
	case isDialFailure(err):
		return nil
	case isTransportFailure(err):
		return engine.ErrAmbiguous
	}
	return nil
}

// apiErrorCode is the S3 error code (NoSuchKey, SlowDown, …) or "".
func apiErrorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// httpStatus is the status of the response the error came with, or 0 when
// there was no response. An interface, not *smithyhttp.ResponseError,
// because the SDK wraps that in awshttp.ResponseError.
func httpStatus(err error) int {
	var withStatus interface{ HTTPStatusCode() int }
	if errors.As(err, &withStatus) {
		return withStatus.HTTPStatusCode()
	}
	return 0
}

// isDialFailure reports a request that never had a connection: the dial
// (or the name lookup before it) failed, so no byte of it was sent.
func isDialFailure(err error) bool {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) || errors.As(err, &opErr) && opErr.Op == "dial"
}

// isTransportFailure reports errors of the network or of the request's
// lifetime, after which the store may or may not have acted.
func isTransportFailure(err error) bool {
	var sendErr *smithyhttp.RequestSendError
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) ||
		errors.As(err, &sendErr) ||
		errors.As(err, &netErr) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE)
}
