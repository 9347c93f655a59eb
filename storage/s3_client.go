package storage

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3ClientOptions are the few knobs S3-compatible stores need beyond the
// standard AWS configuration.
type S3ClientOptions struct {
	// PathStyle addresses buckets as http://host/bucket/key instead of
	// http://bucket.host/key. MinIO, gofakes3 and most self-hosted stores
	// reached by IP or localhost need it.
	PathStyle bool
	// ChecksumWhenRequired sets RequestChecksumCalculation and
	// ResponseChecksumValidation to WhenRequired. The SDK's default
	// (WhenSupported) sends bodies with aws-chunked framing and trailing
	// CRCs, which gofakes3 and other partial implementations store
	// verbatim as the object body (docs/DESIGN.md §12). Leave it off against AWS:
	// the default end-to-end checksums are worth having there.
	ChecksumWhenRequired bool
	// LoadOptions are passed to config.LoadDefaultConfig after ours, e.g.
	// config.WithCredentialsProvider for a caller with its own credentials.
	LoadOptions []func(*config.LoadOptions) error
}

// NewS3ClientFromEnv builds an S3 client from the standard AWS
// configuration: the default credentials chain, AWS_REGION / profiles,
// and the endpoint variables.
//
// Endpoint overrides need no code here; the SDK honours them itself, and a
// test (TestNewS3ClientFromEnvHonoursEndpointURLS3) pins that down:
//   - config.LoadDefaultConfig reads AWS_ENDPOINT_URL into
//     aws.Config.BaseEndpoint (config/env_config.go, loadEnvConfig:
//     setStringFromEnvVal(&cfg.BaseEndpoint, awsEndpointURLEnv)).
//   - s3.NewFromConfig then calls resolveBaseEndpoint
//     (service/s3/endpoints.go), which starts from cfg.BaseEndpoint and
//     replaces it with AWS_ENDPOINT_URL_S3 (through
//     internal/configsources.ResolveServiceBaseEndpoint →
//     EnvConfig.GetServiceBaseEndpoint, which reads AWS_ENDPOINT_URL_<SDKID>)
//     unless only AWS_ENDPOINT_URL is set, or
//     AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true.
//
// The client keeps the SDK's retryer; S3Store turns retries off per
// request because the engine owns retry policy.
func NewS3ClientFromEnv(ctx context.Context, opts S3ClientOptions) (*s3.Client, error) {
	cfg, err := LoadAWSConfig(ctx, opts)
	if err != nil {
		return nil, err
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = opts.PathStyle
	})
	return client, nil
}

// LoadAWSConfig is the AWS configuration NewS3ClientFromEnv builds its
// client from, for other S3 clients that must see the same settings (the
// Iceberg catalog's file IO).
func LoadAWSConfig(ctx context.Context, opts S3ClientOptions) (aws.Config, error) {
	var load []func(*config.LoadOptions) error
	if opts.ChecksumWhenRequired {
		load = append(load,
			config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
			config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired))
	}
	load = append(load, opts.LoadOptions...)
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("storage: load AWS configuration: %w", err)
	}
	return cfg, nil
}
