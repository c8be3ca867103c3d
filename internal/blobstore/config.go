package blobstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Store kinds of Config.Kind.
const (
	KindFilesystem = "filesystem"
	KindS3         = "s3"
	KindDisabled   = "disabled"
)

// S3 defaults and limits.
const (
	DefaultMultipartThreshold = 8 << 20 // objects larger than this go multipart
	DefaultPartSize           = 8 << 20
	DefaultUploadConcurrency  = 4
	MinPartSize               = 5 << 20 // S3's minimum for every part but the last
	MaxPartSize               = 5 << 30
	MaxParts                  = 10000
)

// ErrDisabled is answered by Open for kind = "disabled" (or an empty kind).
var ErrDisabled = errors.New("backups are not configured: [backup.store] kind is \"disabled\"")

// Config is the `[backup.store]` section of extenddb.toml.
//
//	[backup.store]
//	kind = "filesystem"          # or "s3", or "disabled" (the default)
//	root = "/var/lib/extenddb/backups"
//
//	[backup.store]
//	kind = "s3"
//	bucket = "my-backups"
//	prefix = "extenddb/prod"     # optional, a key-rule prefix
//	region = "eu-west-1"         # optional when the environment has one
//	endpoint = "http://127.0.0.1:9000"  # optional; path-style addressing
//
// Credentials come from the AWS default chain (environment, shared files,
// instance roles) unless access_key_id and secret_access_key are set, which
// is meant for tests and local S3 implementations.
type Config struct {
	Kind string `toml:"kind"`

	// filesystem
	Root string `toml:"root"`

	// s3
	Bucket                string `toml:"bucket"`
	Prefix                string `toml:"prefix"`
	Region                string `toml:"region"`
	Endpoint              string `toml:"endpoint"`
	AllowInsecureEndpoint bool   `toml:"allow_insecure_endpoint"`
	AccessKeyID           string `toml:"access_key_id"`
	SecretAccessKey       string `toml:"secret_access_key"`
	SessionToken          string `toml:"session_token"`
	// MultipartThreshold: objects larger than this many bytes are uploaded
	// in parts. 0 means DefaultMultipartThreshold.
	MultipartThreshold int64 `toml:"multipart_threshold"`
	// PartSize: bytes per part (5 MiB to 5 GiB). 0 means DefaultPartSize.
	// An object may have at most MaxParts parts.
	PartSize int64 `toml:"part_size"`
	// UploadConcurrency: parts in flight per upload. 0 means 4.
	UploadConcurrency int `toml:"upload_concurrency"`

	// pathStyle, when set by OpenBucket from [s3] path_style, overrides
	// the default (path-style with an endpoint, virtual-hosted without).
	pathStyle *bool
}

func (c Config) kind() string {
	if c.Kind == "" {
		return KindDisabled
	}
	return c.Kind
}

// withDefaults fills the zero S3 tunables.
func (c Config) withDefaults() Config {
	if c.MultipartThreshold == 0 {
		c.MultipartThreshold = DefaultMultipartThreshold
	}
	if c.PartSize == 0 {
		c.PartSize = DefaultPartSize
	}
	if c.UploadConcurrency == 0 {
		c.UploadConcurrency = DefaultUploadConcurrency
	}
	return c
}

func keyErr(key, format string, args ...any) error {
	return fmt.Errorf("backup.store.%s: %s", key, fmt.Sprintf(format, args...))
}

// Validate checks the configuration without touching the store. Every error
// names its key as backup.store.<key>; several errors are joined.
func (c Config) Validate() error {
	var errs []error
	add := func(key, format string, args ...any) { errs = append(errs, keyErr(key, format, args...)) }
	s3Only := func() {
		for key, set := range map[string]bool{
			"bucket": c.Bucket != "", "prefix": c.Prefix != "", "region": c.Region != "",
			"endpoint": c.Endpoint != "", "allow_insecure_endpoint": c.AllowInsecureEndpoint,
			"access_key_id": c.AccessKeyID != "", "secret_access_key": c.SecretAccessKey != "",
			"session_token": c.SessionToken != "", "multipart_threshold": c.MultipartThreshold != 0,
			"part_size": c.PartSize != 0, "upload_concurrency": c.UploadConcurrency != 0,
		} {
			if set {
				add(key, "only valid with kind = %q", KindS3)
			}
		}
	}
	switch c.kind() {
	case KindDisabled:
	case KindFilesystem:
		if c.Root == "" {
			add("root", "required with kind = %q", KindFilesystem)
		} else if !strings.HasPrefix(c.Root, "/") {
			add("root", "%q must be an absolute path", c.Root)
		}
		s3Only()
	case KindS3:
		if c.Root != "" {
			add("root", "only valid with kind = %q", KindFilesystem)
		}
		if c.Bucket == "" {
			add("bucket", "required with kind = %q", KindS3)
		} else if strings.ContainsAny(c.Bucket, "/\\ ") {
			add("bucket", "%q is not a bucket name", c.Bucket)
		}
		if c.Prefix != "" {
			if err := ValidateKey(c.Prefix); err != nil {
				add("prefix", "%q: %v (no leading or trailing slash)", c.Prefix, err)
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
		d := c.withDefaults()
		if d.MultipartThreshold < 0 {
			add("multipart_threshold", "must not be negative")
		}
		if d.PartSize < MinPartSize || d.PartSize > MaxPartSize {
			add("part_size", "%d is outside %d..%d bytes", d.PartSize, MinPartSize, MaxPartSize)
		}
		if d.UploadConcurrency < 1 || d.UploadConcurrency > 64 {
			add("upload_concurrency", "%d is outside 1..64", d.UploadConcurrency)
		}
	default:
		add("kind", "%q is not one of %q, %q, %q", c.Kind, KindFilesystem, KindS3, KindDisabled)
	}
	return errors.Join(errs...)
}

// checkEndpoint allows https anywhere and http only on loopback unless
// allowInsecure is set.
func checkEndpoint(endpoint string, allowInsecure bool) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("%q: %v", endpoint, err)
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", endpoint)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if allowInsecure || isLoopback(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("%q is plain http to a host that is not loopback; use https or set backup.store.allow_insecure_endpoint = true", endpoint)
	default:
		return fmt.Errorf("%q: scheme must be https or http", endpoint)
	}
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Open validates cfg and opens the configured store. It does not call the
// store's Validate; callers do that at startup to report reachability. Kind
// "disabled" answers ErrDisabled.
func Open(ctx context.Context, cfg Config) (Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch cfg.kind() {
	case KindFilesystem:
		return NewFS(cfg.Root)
	case KindS3:
		return NewS3(ctx, cfg)
	default:
		return nil, ErrDisabled
	}
}
