package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/skipprd/skipprd/engine"
)

// CreateMultipartUpload implements engine.ObjectStore.
func (s *S3Store) CreateMultipartUpload(key string, done func(uploadID string, err error)) {
	var id string
	s.do(S3CreateUpload, func(ctx context.Context) error {
		out, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: aws.String(key)}, noRetries)
		if err != nil {
			return s3Error("CreateMultipartUpload", key, err)
		}
		id = aws.ToString(out.UploadId)
		if id == "" {
			// The upload may exist, but we cannot name it.
			return fmt.Errorf("storage: s3 CreateMultipartUpload %q: no upload id: %w", key, engine.ErrAmbiguous)
		}
		return nil
	}, func(err error) { done(id, err) })
}

// UploadPart implements engine.ObjectStore. The body is borrowed as in
// PutObject.
func (s *S3Store) UploadPart(key, uploadID string, n int32, body []byte, done func(etag string, err error)) {
	if n < 1 {
		panic(fmt.Sprintf("storage: UploadPart %q: part number %d, want >= 1", key, n))
	}
	borrowed := newBorrowedBody(body)
	req := &s3.UploadPartInput{
		Bucket:        &s.bucket,
		Key:           aws.String(key),
		UploadId:      aws.String(uploadID),
		PartNumber:    aws.Int32(n),
		Body:          borrowed,
		ContentLength: aws.Int64(int64(len(body))),
	}
	var etag string
	s.do(S3UploadPart, func(ctx context.Context) error {
		defer borrowed.revoke()
		out, err := s.client.UploadPart(ctx, req, noRetries)
		if err != nil {
			return s3Error("UploadPart", key, err)
		}
		etag = aws.ToString(out.ETag)
		return nil
	}, func(err error) { done(etag, err) })
}

// CompleteMultipartUpload implements engine.ObjectStore.
func (s *S3Store) CompleteMultipartUpload(key, uploadID string, parts []engine.CompletedPart, done func(err error)) {
	completed := make([]types.CompletedPart, len(parts)) // copied now: parts is borrowed
	for i, p := range parts {
		completed[i] = types.CompletedPart{PartNumber: aws.Int32(p.Number), ETag: aws.String(p.ETag)}
	}
	req := &s3.CompleteMultipartUploadInput{
		Bucket:          &s.bucket,
		Key:             aws.String(key),
		UploadId:        aws.String(uploadID),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: completed},
	}
	s.do(S3CompleteUpload, func(ctx context.Context) error {
		_, err := s.client.CompleteMultipartUpload(ctx, req, noRetries)
		return s3Error("CompleteMultipartUpload", key, err)
	}, done)
}

// AbortMultipartUpload implements engine.ObjectStore.
func (s *S3Store) AbortMultipartUpload(key, uploadID string, done func(err error)) {
	req := &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: aws.String(key), UploadId: aws.String(uploadID)}
	s.do(S3AbortUpload, func(ctx context.Context) error {
		_, err := s.client.AbortMultipartUpload(ctx, req, noRetries)
		return s3Error("AbortMultipartUpload", key, err)
	}, done)
}

// ListMultipartUploads implements engine.ObjectStore. The markers are
// passed back to the store verbatim: S3 means "the last upload of the
// previous page" by them, gofakes3 "the first upload of the next page",
// and each is consistent with itself only.
func (s *S3Store) ListMultipartUploads(prefix, keyMarker, uploadIDMarker string, done func(page engine.UploadsPage, err error)) {
	req := &s3.ListMultipartUploadsInput{
		Bucket:         &s.bucket,
		Prefix:         optional(prefix),
		KeyMarker:      optional(keyMarker),
		UploadIdMarker: optional(uploadIDMarker),
		MaxUploads:     aws.Int32(s.opts.ListPageSize),
	}
	var page engine.UploadsPage
	s.do(S3ListUploads, func(ctx context.Context) error {
		out, err := s.client.ListMultipartUploads(ctx, req, noRetries)
		if err != nil {
			err = s3Error("ListMultipartUploads", prefix, err)
			if errors.Is(err, engine.ErrNoSuchUpload) {
				// gofakes3 answers NoSuchUpload for a bucket that never had
				// an upload; AWS never sends it for a listing. Either way it
				// can only mean "nothing to list".
				return nil
			}
			return err
		}
		page, err = uploadsPage(out)
		return s3Error("ListMultipartUploads", prefix, err)
	}, func(err error) { done(page, err) })
}

// uploadsPage converts one ListMultipartUploads page.
func uploadsPage(out *s3.ListMultipartUploadsOutput) (engine.UploadsPage, error) {
	page := engine.UploadsPage{
		Uploads:   make([]engine.Upload, 0, len(out.Uploads)),
		Truncated: aws.ToBool(out.IsTruncated),
	}
	for _, u := range out.Uploads {
		page.Uploads = append(page.Uploads, engine.Upload{
			Key:             aws.ToString(u.Key),
			UploadID:        aws.ToString(u.UploadId),
			InitiatedUnixMs: unixMs(u.Initiated),
		})
	}
	if page.Truncated {
		page.NextKeyMarker = aws.ToString(out.NextKeyMarker)
		page.NextUploadIDMarker = aws.ToString(out.NextUploadIdMarker)
		if page.NextKeyMarker == "" {
			// Following it would restart the listing from the top, forever.
			return engine.UploadsPage{}, fmt.Errorf("truncated page without a key marker")
		}
	}
	return page, nil
}
