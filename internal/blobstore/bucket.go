package blobstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BucketConfig is the `[s3]` section of extenddb.toml: where an S3Bucket
// named in an API call (ExportTableToPointInTime, ImportTable) lives.
//
//	[s3]
//	endpoint = "http://127.0.0.1:9000"  # optional; real S3 when empty
//	region = "eu-west-1"                # optional when the environment has one
//	path_style = true                   # optional; default: true with an endpoint
//
//	[s3]
//	filesystem_root = "/srv/extenddb/buckets"  # bucket b is the directory <root>/b
//
// Credentials come from the AWS default chain unless access_key_id and
// secret_access_key are set (meant for tests and local S3 servers).
type BucketConfig struct {
	Endpoint              string `toml:"endpoint"`
	Region                string `toml:"region"`
	PathStyle             *bool  `toml:"path_style"`
	AllowInsecureEndpoint bool   `toml:"allow_insecure_endpoint"`
	AccessKeyID           string `toml:"access_key_id"`
	SecretAccessKey       string `toml:"secret_access_key"`
	SessionToken          string `toml:"session_token"`
	// FilesystemRoot maps buckets to directories instead of S3.
	FilesystemRoot string `toml:"filesystem_root"`
}

// Validate checks the section without touching any store; errors name
// their key as s3.<key>.
func (c BucketConfig) Validate() error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("s3.%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.FilesystemRoot != "" {
		if !filepath.IsAbs(c.FilesystemRoot) {
			add("filesystem_root", "%q must be an absolute path", c.FilesystemRoot)
		}
		if c.Endpoint != "" {
			add("endpoint", "not valid with filesystem_root")
		}
	}
	if c.Endpoint != "" {
		if err := checkEndpoint(c.Endpoint, c.AllowInsecureEndpoint); err != nil {
			add("endpoint", "%v", err)
		}
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		add("access_key_id", "access_key_id and secret_access_key must be set together")
	}
	if c.SessionToken != "" && c.AccessKeyID == "" {
		add("session_token", "requires access_key_id and secret_access_key")
	}
	return errors.Join(errs...)
}

// ValidBucketName reports whether name can name a bucket here: S3's rules
// (3-63 characters of lower-case letters, digits, dots and hyphens,
// starting and ending with a letter or digit), which also keep a
// filesystem bucket inside its root.
func ValidBucketName(name string) bool {
	if len(name) < 3 || len(name) > 63 || strings.Contains(name, "..") {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case (r == '.' || r == '-') && i > 0 && i < len(name)-1:
		default:
			return false
		}
	}
	return true
}

// OpenBucket opens the store for bucket and key prefix (no leading or
// trailing slash; "" for the bucket's top) under cfg. With filesystem_root
// the bucket must already exist as a directory, as an S3 bucket must; the
// directory store's rules apply to the opened directory (mode 0700, no
// symlink), and prefix directories are created with mode 0700.
func OpenBucket(ctx context.Context, cfg BucketConfig, bucket, prefix string) (Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !ValidBucketName(bucket) {
		return nil, fmt.Errorf("%q is not a valid bucket name", bucket)
	}
	if prefix != "" {
		if err := ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("prefix %q: %v", prefix, err)
		}
	}
	if cfg.FilesystemRoot != "" {
		dir := filepath.Join(cfg.FilesystemRoot, bucket)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("bucket %q does not exist (no directory %s)", bucket, dir)
		}
		if prefix != "" {
			dir = filepath.Join(dir, filepath.FromSlash(prefix))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("bucket %q: %w", bucket, err)
			}
		}
		return NewFS(dir)
	}
	return NewS3(ctx, Config{
		Kind: KindS3, Bucket: bucket, Prefix: prefix, Region: cfg.Region,
		Endpoint: cfg.Endpoint, AllowInsecureEndpoint: cfg.AllowInsecureEndpoint,
		AccessKeyID: cfg.AccessKeyID, SecretAccessKey: cfg.SecretAccessKey,
		SessionToken: cfg.SessionToken, pathStyle: cfg.PathStyle,
	})
}
