// Package s3test starts and selects the S3 implementations the store tests
// run against: gofakes3 in-process (every run) and moto's server (when
// asked for). Test-only; linked into test binaries alone.
//
// Selection: EXTENDDB_TEST_STORES is a comma list among fs, gofakes3, moto
// (default "fs,gofakes3"). moto needs EXTENDDB_TEST_MOTO_ENDPOINT (see
// scripts/moto.sh); a store that was asked for and cannot be reached fails
// the run, it is never skipped.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/extenddb/extenddb/internal/blobstore"
)

// Known store names.
var Known = []string{"fs", "gofakes3", "moto"}

// Selected answers the stores asked for by EXTENDDB_TEST_STORES and an
// error for an unknown name.
func Selected() ([]string, error) {
	v := os.Getenv("EXTENDDB_TEST_STORES")
	if strings.TrimSpace(v) == "" {
		return []string{"fs", "gofakes3"}, nil
	}
	var out []string
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(Known, n) {
			return nil, fmt.Errorf("EXTENDDB_TEST_STORES: unknown store %q (known: %s)", n, strings.Join(Known, ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// Wants reports whether store name was selected; an invalid selection fails t.
func Wants(t testing.TB, name string) bool {
	sel, err := Selected()
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(sel, name)
}

// Server is a reachable S3 implementation.
type Server struct {
	Name     string
	Endpoint string
}

// Static test credentials (gofakes3 and moto accept any).
const (
	AccessKey = "extenddb-test"
	SecretKey = "extenddb-test-secret"
	Region    = "us-east-1"
)

// Gofakes3 starts an in-process gofakes3 server for the test.
func Gofakes3(t testing.TB) Server {
	t.Helper()
	backend := s3mem.New()
	f := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv := httptest.NewServer(f.Server())
	t.Cleanup(srv.Close)
	return Server{Name: "gofakes3", Endpoint: srv.URL}
}

var motoOnce sync.Map // endpoint -> error

// Moto answers the moto server named by EXTENDDB_TEST_MOTO_ENDPOINT and
// fails t if it is unset or does not answer.
func Moto(t testing.TB) Server {
	t.Helper()
	ep := os.Getenv("EXTENDDB_TEST_MOTO_ENDPOINT")
	if ep == "" {
		t.Fatal("store moto was asked for (EXTENDDB_TEST_STORES) but EXTENDDB_TEST_MOTO_ENDPOINT is not set; start it with: export EXTENDDB_TEST_MOTO_ENDPOINT=$(scripts/moto.sh)")
	}
	errv, _ := motoOnce.LoadOrStore(ep, sync.OnceValue(func() error {
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(ep + "/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}))
	if err := errv.(func() error)(); err != nil {
		t.Fatalf("store moto was asked for but %s does not answer: %v", ep, err)
	}
	return Server{Name: "moto", Endpoint: ep}
}

// Client answers a raw S3 client for srv.
func Client(srv Server) *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(srv.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	})
}

// NewBucket creates a bucket with a fresh name and answers it.
func NewBucket(t testing.TB, srv Server) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := "extenddb-test-" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := Client(srv).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("%s: create bucket %s: %v", srv.Name, name, err)
	}
	return name
}

// Config answers a store configuration for bucket on srv with test
// credentials and the given prefix.
func Config(srv Server, bucket, prefix string) blobstore.Config {
	return blobstore.Config{
		Kind:               blobstore.KindS3,
		Bucket:             bucket,
		Prefix:             prefix,
		Region:             Region,
		Endpoint:           srv.Endpoint,
		AccessKeyID:        AccessKey,
		SecretAccessKey:    SecretKey,
		MultipartThreshold: blobstore.MinPartSize,
		PartSize:           blobstore.MinPartSize,
	}
}

// OpenUploads answers the multipart uploads still open in bucket.
func OpenUploads(t testing.TB, srv Server, bucket string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := Client(srv).ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		var ae smithy.APIError
		if srv.Name == "gofakes3" && errors.As(err, &ae) && ae.ErrorCode() == "NoSuchUpload" {
			// gofakes3 answers NoSuchUpload for a bucket in which no
			// upload was ever started (it keeps the bucket's upload index
			// once one was), so: none open.
			return nil
		}
		t.Fatalf("%s: ListMultipartUploads: %v", srv.Name, err)
	}
	var ids []string
	for _, u := range out.Uploads {
		ids = append(ids, aws.ToString(u.Key)+"#"+aws.ToString(u.UploadId))
	}
	return ids
}
