package blobstore_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/internal/s3test"
)

// TestOpenBucketS3 writes through OpenBucket and reads the object back with
// a plain S3 client at bucket/prefix/key.
func TestOpenBucketS3(t *testing.T) {
	ctx := context.Background()
	for _, srv := range s3Servers(t) {
		t.Run(srv.Name, func(t *testing.T) {
			bucket := s3test.NewBucket(t, srv)
			cfg := blobstore.BucketConfig{Endpoint: srv.Endpoint, Region: s3test.Region,
				AccessKeyID: s3test.AccessKey, SecretAccessKey: s3test.SecretKey}
			st, err := blobstore.OpenBucket(ctx, cfg, bucket, "exports/t1")
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Put(ctx, "AWSDynamoDB/x/manifest-summary.json", strings.NewReader("{}")); err != nil {
				t.Fatal(err)
			}
			out, err := s3test.Client(srv).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("exports/t1/AWSDynamoDB/x/manifest-summary.json")})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(out.Body)
			out.Body.Close()
			if string(b) != "{}" {
				t.Fatalf("read %q", b)
			}
		})
	}
}
