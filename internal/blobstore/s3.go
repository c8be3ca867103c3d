package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3 is the S3 store (aws-sdk-go-v2). Key k lives at object <prefix>/k of
// the bucket.
//
//   - Objects up to the multipart threshold are buffered and sent with one
//     PutObject (atomic on S3). Larger ones are uploaded in parts
//     (PartSize, UploadConcurrency in flight); any failure or cancellation
//     aborts the upload, so no part outlives the call. The one window S3
//     leaves open: a CompleteMultipartUpload whose answer is lost may have
//     published the object.
//   - PutIfAbsent sends If-None-Match: * with PutObject or
//     CompleteMultipartUpload (412 PreconditionFailed or 409
//     ConditionalRequestConflict -> ErrExists). For multipart it first does a
//     HeadObject so that an existing key is refused before any upload.
//   - DeletePrefix lists and deletes in DeleteObjects batches of 1000.
//   - A custom endpoint uses path-style addressing; plain http is allowed
//     only to loopback unless allow_insecure_endpoint is set.
//   - Validate lists one key under the prefix and wraps the service's error
//     unchanged (errors.As to smithy.APIError gives its code).
type S3 struct {
	client      *s3.Client
	bucket      string
	prefix      string // "" or ends in "/"
	threshold   int64
	partSize    int64
	concurrency int
	bufs        sync.Pool
}

// NewS3 builds an S3 store from cfg (Kind must be "s3"; cfg is validated).
func NewS3(ctx context.Context, cfg Config) (*S3, error) {
	cfg.Kind = KindS3
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3store: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		if cfg.Endpoint == "" {
			return nil, keyErr("region", "not set and the environment names no AWS region")
		}
		awsCfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
			o.UsePathStyle = true
		}
		if cfg.pathStyle != nil {
			o.UsePathStyle = *cfg.pathStyle
		}
		// Checksums only where the API requires them: S3-compatible
		// servers differ in their support of the newer checksum headers,
		// and the backup format carries its own SHA-256.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	s := &S3{
		client:      client,
		bucket:      cfg.Bucket,
		threshold:   cfg.MultipartThreshold,
		partSize:    cfg.PartSize,
		concurrency: cfg.UploadConcurrency,
	}
	if cfg.Prefix != "" {
		s.prefix = cfg.Prefix + "/"
	}
	s.bufs.New = func() any { b := make([]byte, s.partSize); return &b }
	return s, nil
}

// Client is the underlying S3 client (for tests and diagnostics).
func (s *S3) Client() *s3.Client { return s.client }

// Bucket and Prefix answer where the store lives; Prefix is "" or ends in "/".
func (s *S3) Bucket() string { return s.bucket }
func (s *S3) Prefix() string { return s.prefix }

func (s *S3) String() string { return "s3://" + s.bucket + "/" + s.prefix }

func (s *S3) full(key string) string { return s.prefix + key }

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// isNoKey: the object does not exist (but the bucket does).
func isNoKey(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	code := apiCode(err)
	if code == "NoSuchBucket" {
		return false
	}
	return code == "NoSuchKey" || code == "NotFound" || (code == "" && httpStatus(err) == http.StatusNotFound)
}

func isExists(err error) bool {
	code := apiCode(err)
	st := httpStatus(err)
	return code == "PreconditionFailed" || code == "ConditionalRequestConflict" ||
		st == http.StatusPreconditionFailed || st == http.StatusConflict
}

func (s *S3) Put(ctx context.Context, key string, r io.Reader) error {
	return s.put(ctx, key, r, false)
}

func (s *S3) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	return s.put(ctx, key, r, true)
}

func (s *S3) put(ctx context.Context, key string, r io.Reader, exclusive bool) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	src := CtxReader(ctx, r)
	var head bytes.Buffer
	if _, err := io.CopyN(&head, src, s.threshold+1); err != nil && err != io.EOF {
		return fmt.Errorf("s3store: put %q: %w", key, err)
	}
	if int64(head.Len()) > s.threshold {
		return s.putMultipart(ctx, key, io.MultiReader(&head, src), exclusive)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.full(key)),
		Body:          bytes.NewReader(head.Bytes()),
		ContentLength: aws.Int64(int64(head.Len())),
	}
	if exclusive {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := s.client.PutObject(ctx, in); err != nil {
		if exclusive && isExists(err) {
			return fmt.Errorf("%w: %q", ErrExists, key)
		}
		return fmt.Errorf("s3store: put %q: %w", key, err)
	}
	return nil
}

func (s *S3) putMultipart(ctx context.Context, key string, src io.Reader, exclusive bool) (err error) {
	full := s.full(key)
	if exclusive {
		if _, herr := s.Head(ctx, key); herr == nil {
			return fmt.Errorf("%w: %q", ErrExists, key)
		} else if !errors.Is(herr, ErrNotFound) {
			return herr
		}
	}
	created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(full),
	})
	if err != nil {
		return fmt.Errorf("s3store: put %q: create multipart upload: %w", key, err)
	}
	uploadID := created.UploadId
	defer func() {
		if err == nil {
			return
		}
		// Abort with a context that survives the caller's cancellation.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_, aerr := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket:   aws.String(s.bucket),
			Key:      aws.String(full),
			UploadId: uploadID,
		})
		if aerr != nil && apiCode(aerr) != "NoSuchUpload" {
			err = fmt.Errorf("%w (and aborting upload %s failed: %v)", err, aws.ToString(uploadID), aerr)
		}
	}()

	parts, err := s.uploadParts(ctx, key, uploadID, src)
	if err != nil {
		return err
	}
	slices.SortFunc(parts, func(a, b types.CompletedPart) int { return int(*a.PartNumber - *b.PartNumber) })
	in := &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(s.bucket),
		Key:             aws.String(full),
		UploadId:        uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	if exclusive {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := s.client.CompleteMultipartUpload(ctx, in); err != nil {
		if exclusive && isExists(err) {
			return fmt.Errorf("%w: %q", ErrExists, key)
		}
		return fmt.Errorf("s3store: put %q: complete multipart upload: %w", key, err)
	}
	return nil
}

// uploadParts reads src in parts of partSize and uploads them to the
// multipart upload, at most concurrency at once (which bounds the
// buffers in memory). The first failure cancels the others. It returns
// the completed parts in no particular order.
func (s *S3) uploadParts(ctx context.Context, key string, uploadID *string, src io.Reader) ([]types.CompletedPart, error) {
	full := s.full(key)
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		parts []types.CompletedPart
		sem   = make(chan struct{}, s.concurrency)
	)
	fail := func(e error) { cancel(e) }
	var readErr error
	for num := int32(1); ; num++ {
		sem <- struct{}{} // bounds buffers in memory to concurrency
		if pctx.Err() != nil {
			<-sem
			break
		}
		bp := s.bufs.Get().(*[]byte)
		n, rerr := io.ReadFull(src, *bp)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			s.bufs.Put(bp)
			<-sem
			readErr = rerr
			break
		}
		if n == 0 {
			s.bufs.Put(bp)
			<-sem
			break
		}
		if num > MaxParts {
			s.bufs.Put(bp)
			<-sem
			readErr = fmt.Errorf("object exceeds %d parts of %d bytes", MaxParts, s.partSize)
			break
		}
		wg.Add(1)
		go func(num int32, bp *[]byte, n int) {
			defer wg.Done()
			defer func() { s.bufs.Put(bp); <-sem }()
			out, perr := s.client.UploadPart(pctx, &s3.UploadPartInput{
				Bucket:        aws.String(s.bucket),
				Key:           aws.String(full),
				UploadId:      uploadID,
				PartNumber:    aws.Int32(num),
				Body:          bytes.NewReader((*bp)[:n]),
				ContentLength: aws.Int64(int64(n)),
			})
			if perr != nil {
				fail(fmt.Errorf("upload part %d: %w", num, perr))
				return
			}
			mu.Lock()
			parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
			mu.Unlock()
		}(num, bp, n)
		if int64(n) < s.partSize {
			break
		}
	}
	wg.Wait()
	if readErr != nil {
		return nil, fmt.Errorf("s3store: put %q: %w", key, readErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cause := context.Cause(pctx); cause != nil {
		return nil, fmt.Errorf("s3store: put %q: %w", key, cause)
	}
	return parts, nil
}

func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.get(ctx, key, "")
}

func (s *S3) get(ctx context.Context, key, rng string) (io.ReadCloser, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.full(key))}
	if rng != "" {
		in.Range = aws.String(rng)
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		if isNoKey(err) {
			return nil, fmt.Errorf("%w: %q", ErrNotFound, key)
		}
		return nil, fmt.Errorf("s3store: get %q: %w", key, err)
	}
	return CtxReadCloser(ctx, out.Body), nil
}

func (s *S3) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("%w: negative offset %d", ErrInvalidRange, off)
	}
	empty := func() (io.ReadCloser, error) {
		info, err := s.Head(ctx, key)
		if err != nil {
			return nil, err
		}
		if off > info.Size {
			return nil, fmt.Errorf("%w: offset %d past the end of %q (%d bytes)", ErrInvalidRange, off, key, info.Size)
		}
		if off == info.Size || n == 0 {
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, nil
	}
	if n == 0 {
		return empty()
	}
	rng := fmt.Sprintf("bytes=%d-", off)
	if n > 0 {
		rng = fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	}
	rc, err := s.get(ctx, key, rng)
	if err != nil && (apiCode(err) == "InvalidRange" || httpStatus(err) == http.StatusRequestedRangeNotSatisfiable) {
		if rc, err := empty(); rc != nil || err != nil {
			return rc, err
		}
	}
	return rc, err
}

func (s *S3) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ValidateKey(key); err != nil {
		return ObjectInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.full(key))})
	if err != nil {
		if isNoKey(err) {
			return ObjectInfo{}, fmt.Errorf("%w: %q", ErrNotFound, key)
		}
		return ObjectInfo{}, fmt.Errorf("s3store: head %q: %w", key, err)
	}
	return ObjectInfo{
		Key:     key,
		Size:    aws.ToInt64(out.ContentLength),
		ModTime: aws.ToTime(out.LastModified).UTC(),
		ETag:    strings.Trim(aws.ToString(out.ETag), `"`),
	}, nil
}

// listRaw answers every object under the whole-component prefix, including
// names that break the key rule, as full object keys with their info.
func (s *S3) listRaw(ctx context.Context, prefix string) ([]types.Object, error) {
	var out []types.Object
	list := func(p string, max int32) error {
		in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(p)}
		if max > 0 {
			in.MaxKeys = aws.Int32(max)
			page, err := s.client.ListObjectsV2(ctx, in)
			if err != nil {
				return err
			}
			out = append(out, page.Contents...)
			return nil
		}
		pg := s3.NewListObjectsV2Paginator(s.client, in)
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return err
			}
			out = append(out, page.Contents...)
		}
		return nil
	}
	if prefix == "" {
		if err := list(s.prefix, 0); err != nil {
			return nil, err
		}
		return out, nil
	}
	// The object named exactly prefix, if any, is the first key that
	// starts with it.
	full := s.full(prefix)
	if err := list(full, 1); err != nil {
		return nil, err
	}
	if len(out) > 0 && aws.ToString(out[0].Key) != full {
		out = out[:0]
	}
	if err := list(full+"/", 0); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *S3) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	return listByWalk(ctx, prefix, s.Walk)
}

// Walk visits the objects List would answer one ListObjectsV2 page at a
// time (S3 answers keys in ascending UTF-8 byte order; each page is sorted
// again in case a service does not).
func (s *S3) Walk(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := ValidatePrefix(prefix); err != nil {
		return err
	}
	last := ""
	visit := func(objs []types.Object) error {
		page := make([]ObjectInfo, 0, len(objs))
		for _, o := range objs {
			k, ok := strings.CutPrefix(aws.ToString(o.Key), s.prefix)
			if !ok || ValidateKey(k) != nil || !UnderPrefix(k, prefix) {
				continue
			}
			page = append(page, ObjectInfo{
				Key:     k,
				Size:    aws.ToInt64(o.Size),
				ModTime: aws.ToTime(o.LastModified).UTC(),
				ETag:    strings.Trim(aws.ToString(o.ETag), `"`),
			})
		}
		slices.SortFunc(page, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
		for _, o := range page {
			if last != "" && o.Key <= last {
				continue // never backwards, never twice
			}
			last = o.Key
			if err := fn(o); err != nil {
				return err
			}
		}
		return nil
	}
	walk := func(p string) error {
		pg := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(p)})
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return &walkErr{err}
			}
			if err := visit(page.Contents); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if prefix == "" {
		err = walk(s.prefix)
	} else {
		// The object named exactly prefix, if any, is the first key that
		// starts with it; then everything under prefix + "/".
		full := s.full(prefix)
		var page *s3.ListObjectsV2Output
		page, err = s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(full), MaxKeys: aws.Int32(1)})
		if err != nil {
			err = &walkErr{err}
		} else if len(page.Contents) > 0 && aws.ToString(page.Contents[0].Key) == full {
			err = visit(page.Contents[:1])
		}
		if err == nil {
			err = walk(full + "/")
		}
	}
	if we, ok := err.(*walkErr); ok {
		return fmt.Errorf("s3store: list %q: %w", prefix, we.err)
	}
	return err
}

// walkErr marks an error of the service during Walk (as opposed to one
// returned by the caller's fn, which Walk answers unchanged).
type walkErr struct{ err error }

func (e *walkErr) Error() string { return e.err.Error() }
func (e *walkErr) Unwrap() error { return e.err }

func (s *S3) DeletePrefix(ctx context.Context, prefix string) error {
	if err := ValidatePrefix(prefix); err != nil {
		return err
	}
	raw, err := s.listRaw(ctx, prefix)
	if err != nil {
		return fmt.Errorf("s3store: delete %q: list: %w", prefix, err)
	}
	for start := 0; start < len(raw); start += 1000 {
		batch := raw[start:min(start+1000, len(raw))]
		ids := make([]types.ObjectIdentifier, len(batch))
		for i, o := range batch {
			ids[i] = types.ObjectIdentifier{Key: o.Key}
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(s.bucket),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return fmt.Errorf("s3store: delete %q: %w", prefix, err)
		}
		for _, e := range out.Errors {
			if aws.ToString(e.Code) == "NoSuchKey" {
				continue // a concurrent deleter got there first
			}
			return fmt.Errorf("s3store: delete %q: object %q: %s: %s", prefix,
				aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
	}
	return nil
}

func (s *S3) Validate(ctx context.Context) error {
	_, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
		Bucket:  aws.String(s.bucket),
		Prefix:  aws.String(s.prefix),
		MaxKeys: aws.Int32(1),
	})
	if err != nil {
		return fmt.Errorf("s3store: validate %s: %w", s, err)
	}
	return nil
}
