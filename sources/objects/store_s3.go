package objects

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3API is what the S3 store calls of an *s3.Client.
type S3API interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// s3Store lists and reads the objects under a prefix of a bucket.
type s3Store struct {
	client   S3API
	bucket   string
	prefix   string // "" or ending in "/"
	pageSize int32  // keys per listing page; 0: S3's default (1,000)
}

// NewS3Store returns a Store over the objects of bucket under prefix;
// keys are relative to it. A prefix that does not end in "/" gets one:
// "in" means the folder in/, not also in2/. Keys ending in "/" (folder
// markers some consoles create) are not listed.
func NewS3Store(client S3API, bucket, prefix string) Store {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &s3Store{client: client, bucket: bucket, prefix: prefix}
}

func (s *s3Store) List(ctx context.Context, after string) (Page, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix)}
	if after != "" {
		in.StartAfter = aws.String(s.prefix + after)
	}
	if s.pageSize > 0 {
		in.MaxKeys = aws.Int32(s.pageSize)
	}
	out, err := s.client.ListObjectsV2(ctx, in)
	if err != nil {
		return Page{}, fmt.Errorf("list s3://%s/%s after %q: %w", s.bucket, s.prefix, after, err)
	}
	var page Page
	last := after
	for _, o := range out.Contents {
		key := strings.TrimPrefix(aws.ToString(o.Key), s.prefix)
		if key <= last {
			return Page{}, fmt.Errorf("list s3://%s/%s after %q: key %q listed after %q: keys must ascend", s.bucket, s.prefix, after, key, last)
		}
		last = key
		if strings.HasSuffix(key, "/") {
			continue // a folder marker
		}
		page.Objects = append(page.Objects, Object{Key: key, Size: aws.ToInt64(o.Size)})
	}
	if aws.ToBool(out.IsTruncated) && last != after {
		page.Next = last
	}
	return page, nil
}

func (s *s3Store) Open(ctx context.Context, key string, off int64) (io.ReadCloser, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)}
	if off > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("get s3://%s/%s%s from byte %d: %w", s.bucket, s.prefix, key, off, err)
	}
	return out.Body, nil
}

func (s *s3Store) ReaderAt(ctx context.Context, key string, size int64) (ReadAtCloser, error) {
	return &s3ReaderAt{ctx: ctx, s: s, key: key, size: size}, nil
}

// s3ReaderAt reads an object with one ranged GET per ReadAt: Parquet
// reads its footer, then whole column chunks, so the GETs are few and
// large.
type s3ReaderAt struct {
	ctx  context.Context
	s    *s3Store
	key  string
	size int64
}

func (r *s3ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("s3://%s/%s%s: read at negative offset %d", r.s.bucket, r.s.prefix, r.key, off)
	}
	if off >= r.size || len(p) == 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), r.size-off)
	out, err := r.s.client.GetObject(r.ctx, &s3.GetObjectInput{
		Bucket: aws.String(r.s.bucket),
		Key:    aws.String(r.s.prefix + r.key),
		Range:  aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1)),
	})
	if err != nil {
		return 0, fmt.Errorf("get s3://%s/%s%s bytes %d..%d: %w", r.s.bucket, r.s.prefix, r.key, off, off+n, err)
	}
	defer out.Body.Close()
	got, err := io.ReadFull(out.Body, p[:n])
	if err != nil {
		return got, fmt.Errorf("read s3://%s/%s%s bytes %d..%d: got %d: %w", r.s.bucket, r.s.prefix, r.key, off, off+n, got, err)
	}
	if n < int64(len(p)) {
		return got, io.EOF
	}
	return got, nil
}

func (r *s3ReaderAt) Close() error { return nil }
