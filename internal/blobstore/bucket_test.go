package blobstore

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBucketConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  BucketConfig
		want string // "" = valid
	}{
		{BucketConfig{}, ""},
		{BucketConfig{FilesystemRoot: "/srv/b"}, ""},
		{BucketConfig{Endpoint: "http://127.0.0.1:9000", Region: "us-east-1"}, ""},
		{BucketConfig{FilesystemRoot: "rel"}, "s3.filesystem_root"},
		{BucketConfig{FilesystemRoot: "/srv", Endpoint: "https://s3.example.com"}, "s3.endpoint"},
		{BucketConfig{Endpoint: "http://s3.example.com"}, "s3.endpoint"},
		{BucketConfig{AccessKeyID: "a"}, "s3.access_key_id"},
		{BucketConfig{SessionToken: "t"}, "s3.session_token"},
	} {
		err := tc.cfg.Validate()
		if tc.want == "" && err != nil {
			t.Errorf("%+v: %v", tc.cfg, err)
		}
		if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: got %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}

func TestValidBucketName(t *testing.T) {
	for name, ok := range map[string]bool{
		"my-bucket": true, "a.b.c": true, "abc": true, "ab": false, "..": false,
		"../x": false, "a/b": false, "Upper": false, "-ab": false, "ab-": false, "a..b": false,
	} {
		if ValidBucketName(name) != ok {
			t.Errorf("ValidBucketName(%q) = %v, want %v", name, !ok, ok)
		}
	}
}

func TestOpenBucketFilesystem(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	cfg := BucketConfig{FilesystemRoot: root}
	if _, err := OpenBucket(ctx, cfg, "missing", ""); err == nil {
		t.Fatal("a bucket without a directory opened")
	}
	if _, err := OpenBucket(ctx, cfg, "..", ""); err == nil {
		t.Fatal("bucket .. opened")
	}
	if err := os.Mkdir(filepath.Join(root, "exports"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBucket(ctx, cfg, "exports", "/lead"); err == nil {
		t.Fatal("a prefix with a leading slash opened")
	}
	st, err := OpenBucket(ctx, cfg, "exports", "team/x")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "AWSDynamoDB/1/_started", strings.NewReader("")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "exports", "team", "x", "AWSDynamoDB", "1", "_started")); err != nil {
		t.Fatalf("object not at <root>/<bucket>/<prefix>/<key>: %v", err)
	}
	rc, err := st.Get(ctx, "AWSDynamoDB/1/_started")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if len(b) != 0 {
		t.Fatalf("read %q", b)
	}
}
