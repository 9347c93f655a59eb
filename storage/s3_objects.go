package storage

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/skipprd/skipprd/engine"
)

// PutObject implements engine.ObjectStore. The body stays borrowed until
// done: it is revoked before the completion is posted (see borrowedBody).
func (s *S3Store) PutObject(in engine.PutObjectInput, done func(etag string, err error)) {
	body := newBorrowedBody(in.Body)
	req := &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           aws.String(in.Key),
		Body:          body,
		ContentLength: aws.Int64(int64(len(in.Body))),
		IfMatch:       optional(in.IfMatch),
	}
	if in.IfNoneMatch {
		req.IfNoneMatch = aws.String("*")
	}
	var etag string
	s.do(S3Put, func(ctx context.Context) error {
		defer body.revoke()
		out, err := s.client.PutObject(ctx, req, noRetries)
		if err != nil {
			return s3Error("PutObject", in.Key, err)
		}
		etag = aws.ToString(out.ETag)
		return nil
	}, func(err error) { done(etag, err) })
}

// GetObject implements engine.ObjectStore.
//
// REQUIRES: in.Limit > 0; a Range has Start >= 0 and Length > 0.
func (s *S3Store) GetObject(in engine.GetObjectInput, done func(body []byte, info engine.ObjectInfo, err error)) {
	if in.Limit <= 0 {
		panic(fmt.Sprintf("storage: GetObject %q: limit %d, want > 0", in.Key, in.Limit))
	}
	req := &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(in.Key)}
	if r := in.Range; r != nil {
		if r.Start < 0 || r.Length <= 0 {
			panic(fmt.Sprintf("storage: GetObject %q: range start %d length %d", in.Key, r.Start, r.Length))
		}
		req.Range = aws.String(fmt.Sprintf("bytes=%d-%d", r.Start, r.Start+r.Length-1))
	}
	var body []byte
	var info engine.ObjectInfo
	s.do(S3Get, func(ctx context.Context) (err error) {
		body, info, err = s.getObject(ctx, req, in.Limit)
		return s3Error("GetObject", in.Key, err)
	}, func(err error) { done(body, info, err) })
}

// getObject sends the GET and reads at most limit bytes of the body; the
// body is read under ctx, so the request timeout covers the transfer.
func (s *S3Store) getObject(ctx context.Context, req *s3.GetObjectInput, limit int64) ([]byte, engine.ObjectInfo, error) {
	out, err := s.client.GetObject(ctx, req, noRetries)
	if err != nil {
		return nil, engine.ObjectInfo{}, err
	}
	defer out.Body.Close() // before reading to the end: closes the connection
	declared := int64(-1)
	if out.ContentLength != nil {
		declared = *out.ContentLength
	}
	body, err := readLimited(out.Body, declared, limit)
	if err != nil {
		return nil, engine.ObjectInfo{}, err
	}
	info := engine.ObjectInfo{
		Key:                aws.ToString(req.Key),
		Size:               totalSize(aws.ToString(out.ContentRange), int64(len(body))),
		ETag:               aws.ToString(out.ETag),
		LastModifiedUnixMs: unixMs(out.LastModified),
	}
	return body, info, nil
}

// HeadObject implements engine.ObjectStore.
func (s *S3Store) HeadObject(key string, done func(info engine.ObjectInfo, err error)) {
	var info engine.ObjectInfo
	s.do(S3Head, func(ctx context.Context) error {
		out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(key)}, noRetries)
		if err != nil {
			return s3Error("HeadObject", key, err)
		}
		info = engine.ObjectInfo{
			Key:                key,
			Size:               aws.ToInt64(out.ContentLength),
			ETag:               aws.ToString(out.ETag),
			LastModifiedUnixMs: unixMs(out.LastModified),
		}
		return nil
	}, func(err error) { done(info, err) })
}

// ListObjects implements engine.ObjectStore with ListObjectsV2. The token
// is S3's continuation token, passed through opaquely.
func (s *S3Store) ListObjects(prefix, token string, done func(page engine.ListPage, err error)) {
	req := &s3.ListObjectsV2Input{
		Bucket:            &s.bucket,
		Prefix:            optional(prefix),
		ContinuationToken: optional(token),
		MaxKeys:           aws.Int32(s.opts.ListPageSize),
	}
	var page engine.ListPage
	s.do(S3List, func(ctx context.Context) error {
		out, err := s.client.ListObjectsV2(ctx, req, noRetries)
		if err != nil {
			return s3Error("ListObjectsV2", prefix, err)
		}
		page, err = listPage(out)
		return s3Error("ListObjectsV2", prefix, err)
	}, func(err error) { done(page, err) })
}

// listPage converts one ListObjectsV2 page. NextToken is set only when
// the page says it is truncated: gofakes3, for one, returns a
// continuation token on the last page too.
func listPage(out *s3.ListObjectsV2Output) (engine.ListPage, error) {
	page := engine.ListPage{Objects: make([]engine.ObjectInfo, 0, len(out.Contents))}
	for _, o := range out.Contents {
		page.Objects = append(page.Objects, engine.ObjectInfo{
			Key:                aws.ToString(o.Key),
			Size:               aws.ToInt64(o.Size),
			ETag:               aws.ToString(o.ETag),
			LastModifiedUnixMs: unixMs(o.LastModified),
		})
	}
	if aws.ToBool(out.IsTruncated) {
		page.NextToken = aws.ToString(out.NextContinuationToken)
		if page.NextToken == "" {
			return engine.ListPage{}, fmt.Errorf("truncated page without a continuation token")
		}
	}
	return page, nil
}

// DeleteObject implements engine.ObjectStore. S3 answers 204 for a
// missing key, which is the contract's "deleting a missing key succeeds".
func (s *S3Store) DeleteObject(key string, done func(err error)) {
	s.do(S3Delete, func(ctx context.Context) error {
		_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(key)}, noRetries)
		return s3Error("DeleteObject", key, err)
	}, done)
}
