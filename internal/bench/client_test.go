package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestClientRequestWritesComplete: the bench's clients never fail to
// write a request, so the transport never closes a connection under a
// response that is still being read. With the SDK's own request body, the
// SDK closed the body as soon as the response headers arrived; net/http's
// write loop, still checking the body for bytes beyond Content-Length,
// then read io.EOF from the closed body (smithy-go's safe closer answers
// WriteTo with io.EOF), took it as a write error and closed the
// connection: Query's 25 KiB responses then failed mid-body with "use of
// closed network connection", counted as server errors ("http:200").
func TestClientRequestWritesComplete(t *testing.T) {
	item := map[string]any{"pk": map[string]string{"S": "r0000-00000"}, "payload": map[string]string{"S": strings.Repeat("x", 1000)}}
	items := make([]any, 25)
	for i := range items {
		items[i] = item
	}
	body, err := json.Marshal(map[string]any{"Items": items, "Count": 25, "ScannedCount": 25})
	if err != nil {
		t.Fatal(err)
	}
	crc := strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("x-amz-crc32", crc)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	defer srv.Close()

	r := &runner{opt: Options{Endpoint: srv.URL, Region: "us-east-1", RequestTimeout: 5 * time.Second}}
	var writeErrs, opErrs, ops atomic.Int64
	var sample atomic.Value
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err != nil {
			writeErrs.Add(1)
			sample.CompareAndSwap(nil, fmt.Sprintf("request write: %v", i.Err))
		}
	}}
	ctx := httptrace.WithClientTrace(context.Background(), trace)
	end := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := r.newClient(1)
			for time.Now().Before(end) {
				_, err := c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("t"), KeyConditionExpression: aws.String("pk = :k"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":k": &types.AttributeValueMemberS{Value: "k"}}})
				ops.Add(1)
				if err != nil {
					opErrs.Add(1)
					sample.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d queries, %d request write errors, %d operation errors", ops.Load(), writeErrs.Load(), opErrs.Load())
	if writeErrs.Load() > 0 || opErrs.Load() > 0 {
		t.Fatalf("%d request write errors, %d operation errors in %d queries; first: %v", writeErrs.Load(), opErrs.Load(), ops.Load(), sample.Load())
	}
}

// closingBody mimics the SDK's request body: once closed, WriteTo answers
// io.EOF (smithy-go's safe closer).
type closingBody struct {
	r      *strings.Reader
	closed atomic.Bool
}

func (b *closingBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, io.EOF
	}
	return b.r.Read(p)
}

func (b *closingBody) WriteTo(w io.Writer) (int64, error) {
	if b.closed.Load() {
		return 0, io.EOF
	}
	return b.r.WriteTo(w)
}

func (b *closingBody) Close() error { b.closed.Store(true); return nil }

type recordingClient struct{ req *http.Request }

func (c *recordingClient) Do(req *http.Request) (*http.Response, error) {
	c.req = req
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

// TestOwnBodyClient: the body the transport gets is its own: the SDK
// closing its body after Do (as it does when the response headers
// arrive) leaves the transport's body whole, and reading it past its end
// (net/http's check for bytes beyond Content-Length) is no error.
func TestOwnBodyClient(t *testing.T) {
	const payload = `{"TableName":"t"}`
	sdkBody := &closingBody{r: strings.NewReader(payload)}
	req, err := http.NewRequest("POST", "http://127.0.0.1:1/", sdkBody)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(payload))
	inner := &recordingClient{}
	if _, err := (ownBodyClient{inner}).Do(req); err != nil {
		t.Fatal(err)
	}
	sdkBody.Close() // the SDK, once Do returned
	got := inner.req.Body
	if got == sdkBody || inner.req.ContentLength != int64(len(payload)) {
		t.Fatalf("transport got the SDK's body (%T) or length %d", got, inner.req.ContentLength)
	}
	var sb strings.Builder
	if _, err := io.Copy(&sb, io.LimitReader(got, int64(len(payload)))); err != nil || sb.String() != payload {
		t.Fatalf("body %q, %v", sb.String(), err)
	}
	if n, err := io.Copy(io.Discard, got); n != 0 || err != nil {
		t.Fatalf("read past the end: %d bytes, %v (net/http takes an error here for a failed request write)", n, err)
	}
	// The SDK's body alone fails that check once closed: the cause.
	if _, err := io.Copy(io.Discard, sdkBody); err != io.EOF {
		t.Fatalf("closed SDK-like body: %v, want io.EOF", err)
	}
}
