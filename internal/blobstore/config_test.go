package blobstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestConfigTOML(t *testing.T) {
	var doc struct {
		Backup struct {
			Store Config `toml:"store"`
		} `toml:"backup"`
	}
	md, err := toml.Decode(`
[backup.store]
kind = "s3"
bucket = "b"
prefix = "x/y"
region = "eu-west-1"
endpoint = "http://127.0.0.1:9000"
allow_insecure_endpoint = false
access_key_id = "AK"
secret_access_key = "SK"
multipart_threshold = 16777216
part_size = 8388608
upload_concurrency = 2
`, &doc)
	if err != nil {
		t.Fatal(err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		t.Fatalf("undecoded keys: %v", u)
	}
	c := doc.Backup.Store
	if c.Kind != "s3" || c.Bucket != "b" || c.Prefix != "x/y" || c.Endpoint != "http://127.0.0.1:9000" || c.MultipartThreshold != 16<<20 || c.UploadConcurrency != 2 || c.AccessKeyID != "AK" {
		t.Fatalf("decoded %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want []string // substrings; nil means valid
	}{
		{Config{}, nil},
		{Config{Kind: "disabled"}, nil},
		{Config{Kind: "filesystem", Root: "/var/lib/x"}, nil},
		{Config{Kind: "s3", Bucket: "b"}, nil},
		{Config{Kind: "s3", Bucket: "b", Endpoint: "https://s3.example.com"}, nil},
		{Config{Kind: "s3", Bucket: "b", Endpoint: "http://localhost:9000"}, nil},
		{Config{Kind: "s3", Bucket: "b", Endpoint: "http://[::1]:9000"}, nil},
		{Config{Kind: "s3", Bucket: "b", Endpoint: "http://s3.internal:9000", AllowInsecureEndpoint: true}, nil},
		{Config{Kind: "nfs"}, []string{"backup.store.kind"}},
		{Config{Kind: "filesystem"}, []string{"backup.store.root"}},
		{Config{Kind: "filesystem", Root: "rel/dir"}, []string{"backup.store.root"}},
		{Config{Kind: "filesystem", Root: "/x", Bucket: "b"}, []string{"backup.store.bucket"}},
		{Config{Kind: "s3"}, []string{"backup.store.bucket"}},
		{Config{Kind: "s3", Bucket: "b", Root: "/x"}, []string{"backup.store.root"}},
		{Config{Kind: "s3", Bucket: "b", Endpoint: "http://10.0.0.5:9000"}, []string{"backup.store.endpoint", "allow_insecure_endpoint"}},
		{Config{Kind: "s3", Bucket: "b", Endpoint: "http://localhost.evil.com"}, []string{"backup.store.endpoint"}},
		{Config{Kind: "s3", Bucket: "b", Endpoint: "ftp://x"}, []string{"backup.store.endpoint"}},
		{Config{Kind: "s3", Bucket: "b", Prefix: "/a/"}, []string{"backup.store.prefix"}},
		{Config{Kind: "s3", Bucket: "b", AccessKeyID: "a"}, []string{"backup.store.access_key_id"}},
		{Config{Kind: "s3", Bucket: "b", PartSize: 1 << 20}, []string{"backup.store.part_size"}},
		{Config{Kind: "s3", Bucket: "b", UploadConcurrency: -1}, []string{"backup.store.upload_concurrency"}},
		{Config{Kind: "s3", Bucket: "b", MultipartThreshold: -1}, []string{"backup.store.multipart_threshold"}},
		{Config{Kind: "s3", Root: "/x"}, []string{"backup.store.bucket", "backup.store.root"}},
	} {
		err := c.cfg.Validate()
		if c.want == nil {
			if err != nil {
				t.Errorf("%+v: %v", c.cfg, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%+v: valid, want %v", c.cfg, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %q lacks %q", c.cfg, err, w)
			}
		}
	}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, Config{}); !errors.Is(err, ErrDisabled) {
		t.Fatalf("Open disabled: %v", err)
	}
	root := t.TempDir() + "/s"
	s, err := Open(ctx, Config{Kind: "filesystem", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*FS); !ok || s.Validate(ctx) != nil {
		t.Fatalf("Open filesystem: %T %v", s, s.Validate(ctx))
	}
	if _, err := Open(ctx, Config{Kind: "s3"}); err == nil || !strings.Contains(err.Error(), "backup.store.bucket") {
		t.Fatalf("Open s3 without bucket: %v", err)
	}
	s3s, err := Open(ctx, Config{Kind: "s3", Bucket: "b", Endpoint: "http://127.0.0.1:1", AccessKeyID: "a", SecretAccessKey: "b", Prefix: "p/q"})
	if err != nil {
		t.Fatal(err)
	}
	if got := s3s.String(); got != "s3://b/p/q/" {
		t.Fatalf("String = %q", got)
	}
}
