package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/extenddb/extenddb/internal/backend/sqlite"
	"github.com/extenddb/extenddb/internal/engine"
)

// edgeServer is a real HTTP server over the API with the listener wrapper
// and the http.Server settings of `extenddb serve`, with short deadlines.
func edgeServer(t *testing.T, keys []AccessKey, lim Limits) (addr string) {
	addr, _ = edgeServerOf(t, keys, lim)
	return addr
}

func edgeServerOf(t *testing.T, keys []AccessKey, lim Limits) (string, *Server) {
	t.Helper()
	b, err := sqlite.Open(context.Background(), sqlite.Options{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	h := New(engine.New(b, engine.Options{}), Options{Ready: b.Ping, Auth: NewAuthenticator(keys), Limits: lim})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 2 * time.Second, IdleTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(WrapListener(ln)) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), h
}

var edgeLimits = Limits{BodyReadTimeout: time.Second, WriteTimeout: time.Second, InflightWait: 200 * time.Millisecond}

// rawExchange writes raw bytes on a fresh connection and reads one
// response, failing when none arrives within limit.
func rawExchange(t *testing.T, addr string, raw string, limit time.Duration) (*http.Response, []byte, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetDeadline(start.Add(limit))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response within %v to %q: %v", limit, truncate(raw), err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, body, time.Since(start)
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// checkShape asserts the DynamoDB error shape and returns the __type.
func checkShape(t *testing.T, name string, resp *http.Response, body []byte) string {
	t.Helper()
	var b map[string]any
	if err := json.Unmarshal(body, &b); err != nil {
		t.Errorf("%s: %d body %q is not JSON", name, resp.StatusCode, body)
		return ""
	}
	typ, _ := b["__type"].(string)
	if typ == "" {
		t.Errorf("%s: no __type in %s", name, body)
	}
	if _, ok := b["message"].(string); !ok {
		t.Errorf("%s: no message in %s", name, body)
	}
	if resp.Header.Get("x-amzn-RequestId") == "" {
		t.Errorf("%s: no x-amzn-RequestId", name)
	}
	if got, want := resp.Header.Get("x-amz-crc32"), strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10); got != want {
		t.Errorf("%s: x-amz-crc32 %q, want %s", name, got, want)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-amz-json-1.0" {
		t.Errorf("%s: Content-Type %q", name, ct)
	}
	return typ
}

const rawListTables = "X-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Type: application/x-amz-json-1.0\r\n"

// TestHTTPEdgesSpeakTheProtocol is the malformed-HTTP corpus: every
// request the server can still answer is answered with a DynamoDB error
// shape, within the configured deadlines.
func TestHTTPEdgesSpeakTheProtocol(t *testing.T) {
	addr := edgeServer(t, nil, edgeLimits)
	ser := prefixService + "SerializationException"
	cases := []struct {
		name, raw string
		status    int
		typ       string
	}{
		{"double slash path", "POST // HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Content-Length: 2\r\n\r\n{}", 200, ""},
		{"dot segments path", "POST /a/../ HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Content-Length: 2\r\n\r\n{}", 200, ""},
		{"gzip, chunked", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 400, ser},
		{"identity te", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Transfer-Encoding: identity\r\n\r\n{}", 400, ser},
		{"bad content-length", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Content-Length: abc\r\n\r\n{}", 400, ser},
		{"negative content-length", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Content-Length: -1\r\n\r\n{}", 400, ser},
		{"two content-lengths", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, ser},
		{"content-length and chunked", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 200, ""}, // RFC 9112 6.3: chunked wins
		{"NUL in header", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "X-Foo: a\x00b\r\nContent-Length: 2\r\n\r\n{}", 400, ser},
		{"CR in header", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "X-Foo: a\rb\r\nContent-Length: 2\r\n\r\n{}", 400, ser},
		{"space in header name", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "X Foo: a\r\nContent-Length: 2\r\n\r\n{}", 400, ser},
		{"header without colon", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "nocolon\r\nContent-Length: 2\r\n\r\n{}", 400, ser},
		{"missing host", "POST / HTTP/1.1\r\n" + rawListTables + "Content-Length: 2\r\n\r\n{}", 400, ser},
		{"two hosts", "POST / HTTP/1.1\r\nHost: x\r\nHost: y\r\n" + rawListTables + "Content-Length: 2\r\n\r\n{}", 400, ser},
		{"bad request line", "POST /\r\nHost: x\r\n\r\n", 400, ser},
		{"bad method", "PO(ST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Content-Length: 2\r\n\r\n{}", 400, ser},
		{"unknown version", "POST / HTTP/9.9\r\nHost: x\r\n" + rawListTables + "Content-Length: 2\r\n\r\n{}", 400, ser},
		{"bad chunk size", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 400, ser},
		{"headers over 1 MB", "POST / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 1<<20+8192) + "\r\n\r\n", 413, prefixService + codeTooLarge},
		{"content-length over 16 MB", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Content-Length: 16777217\r\n\r\n{}", 413, prefixService + codeTooLarge},
		{"content-length larger than body", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Content-Length: 100\r\n\r\n{}", 408, prefixService + codeRequestTimeout},
		{"chunked body never ends", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n", 408, prefixService + codeRequestTimeout},
		{"GET with target", "GET / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "\r\n", 400, prefixService + codeUnknownOperation},
		{"PUT", "PUT / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Content-Length: 2\r\n\r\n{}", 400, prefixService + codeUnknownOperation},
		{"expect other than 100-continue", "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + "Expect: 200-ok\r\nContent-Length: 2\r\n\r\n{}", 417, ser},
	}
	limit := edgeLimits.BodyReadTimeout + 2*time.Second
	for _, c := range cases {
		resp, body, took := rawExchange(t, addr, c.raw, limit)
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d (%s)", c.name, resp.StatusCode, c.status, body)
		}
		if took > limit {
			t.Errorf("%s: answered after %v", c.name, took)
		}
		if c.typ == "" {
			if resp.StatusCode != 200 {
				t.Errorf("%s: %d %s", c.name, resp.StatusCode, body)
			}
			continue
		}
		if typ := checkShape(t, c.name, resp, body); typ != c.typ {
			t.Errorf("%s: __type %q, want %q (%s)", c.name, typ, c.typ, body)
		}
	}
}

// TestSlowClientsAreCutOff: a header that never ends and a client that
// never reads its response do not hold the connection past their
// deadlines.
func TestSlowClientsAreCutOff(t *testing.T) {
	addr := edgeServer(t, nil, edgeLimits)
	// Headers never finished: closed after ReadHeaderTimeout (2s).
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("header stall: connection not closed: %v", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("header stall held for %v", d)
	}
}

// TestUnsignedBodiesAreNotRead: with keys, a request without a valid
// signature header is refused before its body is read (the answer comes
// while the client is still sending), and a signature proven from
// x-amz-content-sha256 is checked against the body once it is read.
func TestUnsignedBodiesAreNotRead(t *testing.T) {
	addr := edgeServer(t, []AccessKey{testKey}, edgeLimits)
	for _, auth := range []string{"", "Authorization: AWS4-HMAC-SHA256 Credential=AKIDUNKNOWNUNKNOWN01/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=00\r\n"} {
		// Declare 15 MB, send only the headers: the answer must not wait.
		raw := "POST / HTTP/1.1\r\nHost: x\r\n" + rawListTables + auth + "Content-Length: 15728640\r\n\r\n"
		resp, body, took := rawExchange(t, addr, raw, 2*time.Second)
		if resp.StatusCode != 400 || took > time.Second {
			t.Errorf("unsigned: %d after %v: %s", resp.StatusCode, took, body)
		}
		typ := checkShape(t, "unsigned", resp, body)
		if typ != prefixService+codeMissingToken && typ != prefixService+codeUnrecognized {
			t.Errorf("unsigned: %s", typ)
		}
	}
	// Signed with the payload hash in x-amz-content-sha256: a bad
	// signature is refused from the headers alone.
	body := strings.Repeat(" ", 1<<20) + "{}"
	req := signedHTTP(t, addr, body, testKey.SecretAccessKey+"x", true)
	raw := rawRequest(req, "")
	resp, rb, took := rawExchange(t, addr, raw, 2*time.Second)
	if typ := checkShape(t, "bad signature", resp, rb); typ != prefixService+codeInvalidSignature || took > time.Second {
		t.Errorf("bad signature from headers: %s after %v", typ, took)
	}
	// The right signature with the header hash, and a different body.
	req = signedHTTP(t, addr, body, testKey.SecretAccessKey, true)
	raw = rawRequest(req, strings.Repeat(" ", 1<<20)+"[]")
	resp, rb, _ = rawExchange(t, addr, raw, 3*time.Second)
	if typ := checkShape(t, "tampered body", resp, rb); typ != prefixService+codeInvalidSignature {
		t.Errorf("tampered body under header hash: %s", typ)
	}
	// And the untampered one works, with and without the hash header.
	for _, withHash := range []bool{true, false} {
		req = signedHTTP(t, addr, body, testKey.SecretAccessKey, withHash)
		resp, rb, _ = rawExchange(t, addr, rawRequest(req, body), 3*time.Second)
		if resp.StatusCode != 200 {
			t.Errorf("signed (hash header %v): %d %s", withHash, resp.StatusCode, rb)
		}
	}
}

func signedHTTP(t *testing.T, addr, body, secret string, hashHeader bool) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader(body))
	r.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	r.Header.Set("Content-Type", "application/x-amz-json-1.0")
	sum := sha256.Sum256([]byte(body))
	h := hex.EncodeToString(sum[:])
	if hashHeader {
		r.Header.Set("X-Amz-Content-Sha256", h)
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: testKey.AccessKeyID, SecretAccessKey: secret},
		r, h, "dynamodb", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	return r
}

// rawRequest renders r's headers with body (whose length is declared as
// r's).
func rawRequest(r *http.Request, body string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "POST / HTTP/1.1\r\nHost: %s\r\n", r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", r.ContentLength, body)
	return b.String()
}

// TestBodyBudget: bodies beyond the server-wide budget wait, then are
// answered ThrottlingException; small requests keep a quarter of the
// budget; the budget is whole again once the holders leave.
func TestBodyBudget(t *testing.T) {
	lim := edgeLimits
	lim.MaxInflightBodyBytes = 16 << 20
	lim.BodyReadTimeout = 3 * time.Second
	addr := edgeServer(t, nil, lim)
	// Two 5 MB bodies (plus a 32 KB reply each) fit in the 12 MB large
	// share; a third does not.
	var holders []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n{", rawListTables, 5<<20)
		holders = append(holders, c)
	}
	time.Sleep(200 * time.Millisecond)
	raw := fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n{", rawListTables, 5<<20)
	resp, body, took := rawExchange(t, addr, raw, 2*time.Second)
	if typ := checkShape(t, "over budget", resp, body); typ != prefixAvailability+codeThrottling || resp.StatusCode != 400 {
		t.Errorf("over budget: %d %s", resp.StatusCode, body)
	}
	if took < lim.InflightWait {
		t.Errorf("throttled after %v, before waiting %v", took, lim.InflightWait)
	}
	if !resp.Close {
		t.Errorf("throttled answer keeps the connection")
	}
	// A small request still passes.
	resp, body, _ = rawExchange(t, addr, "POST / HTTP/1.1\r\nHost: x\r\n"+rawListTables+"Content-Length: 2\r\n\r\n{}", 2*time.Second)
	if resp.StatusCode != 200 {
		t.Errorf("small request under a full large share: %d %s", resp.StatusCode, body)
	}
	// The holders are answered RequestTimeoutException at their deadline.
	for _, c := range holders {
		_ = c.SetReadDeadline(time.Now().Add(lim.BodyReadTimeout + 2*time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("holder: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		if typ := checkShape(t, "holder", resp, b); typ != prefixService+codeRequestTimeout {
			t.Errorf("holder: %d %s", resp.StatusCode, b)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		c, _ := net.Dial("tcp", addr)
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n{}%s", rawListTables, 5<<20, strings.Repeat(" ", 5<<20-2))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err == nil && resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("budget not released: %v %v", resp, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPoolsDropLargeBuffers: buffers that grew past poolableBytes are not
// kept by the pools.
func TestPoolsDropLargeBuffers(t *testing.T) {
	s := newServer(t)
	body := `{"ExclusiveStartTableName":"` + strings.Repeat("a", 2<<20) + `"}`
	do(t, s, "DynamoDB_20120810.ListTables", body)
	for i := 0; i < 10; i++ {
		if b, ok := s.bufs.Get().(interface{ Cap() int }); ok && b.Cap() > poolableBytes {
			t.Fatalf("pool kept a %d-byte buffer", b.Cap())
		}
	}
}

// TestSDKRetriesBudgetErrors: aws-sdk-go-v2 reads the budget's answer as a
// throttle and retries it until the budget has room; the body deadline's
// answer is one of its retryable codes too.
func TestSDKRetriesBudgetErrors(t *testing.T) {
	if _, ok := retry.DefaultThrottleErrorCodes[codeThrottling]; !ok {
		t.Errorf("%s is not an SDK throttle code", codeThrottling)
	}
	if _, ok := retry.DefaultRetryableErrorCodes[codeRequestTimeout]; !ok {
		t.Errorf("%s is not an SDK retryable code", codeRequestTimeout)
	}
	lim := edgeLimits
	lim.MaxInflightBodyBytes = 16 << 20
	addr := edgeServer(t, nil, lim)
	ctx := context.Background()
	c := dynamodb.New(dynamodb.Options{BaseEndpoint: aws.String("http://" + addr), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		Retryer:     retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 10 })})
	if _, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String("tbl"), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
	}); err != nil {
		t.Fatal(err)
	}
	// A 10 MB body held until its deadline (1 s) fills the large share.
	holder, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	fmt.Fprintf(holder, "POST / HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n{", rawListTables, 10<<20)
	time.Sleep(100 * time.Millisecond)
	// 100 keys reserve a 16 MB reply: throttled until the holder is cut.
	var keys []map[string]types.AttributeValue
	for i := 0; i < 100; i++ {
		keys = append(keys, map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: strconv.Itoa(i)}})
	}
	out, err := c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"tbl": {Keys: keys}}})
	if err != nil {
		t.Fatalf("BatchGetItem with retries: %v", err)
	}
	attempts, _ := retry.GetAttemptResults(out.ResultMetadata)
	if len(attempts.Results) < 2 {
		t.Fatalf("BatchGetItem succeeded in %d attempt(s); expected a throttled first attempt", len(attempts.Results))
	}
	var ae smithy.APIError
	if first := attempts.Results[0].Err; !errors.As(first, &ae) || ae.ErrorCode() != codeThrottling {
		t.Errorf("first attempt: %v", first)
	}
}

// TestBudgetAccounting: reservations grow and shrink, large ones keep a
// quarter free, waiters are granted in order as room frees up, one
// request larger than the budget runs alone, and the count of large
// reservations (which gates the memory release) returns to zero.
func TestBudgetAccounting(t *testing.T) {
	ctx := context.Background()
	b := newBudget(16 << 20) // large share 12 MiB
	r1 := &reservation{b: b}
	if !r1.grow(ctx, 10<<20, time.Millisecond) {
		t.Fatal("10 MiB in an empty budget")
	}
	r2 := &reservation{b: b}
	if r2.grow(ctx, 5<<20, 10*time.Millisecond) {
		t.Fatal("large share exceeded")
	}
	for range 2 {
		if !r2.grow(ctx, 1<<20, time.Millisecond) {
			t.Fatal("small reservations beside a large one")
		}
	}
	if b.inUse() != 12<<20 || b.nLarge != 1 {
		t.Fatalf("used %d, large %d", b.inUse(), b.nLarge)
	}
	// A waiter is granted when room frees up.
	got := make(chan bool)
	r3 := &reservation{b: b}
	go func() { got <- r3.grow(ctx, 8<<20, 5*time.Second) }()
	time.Sleep(50 * time.Millisecond)
	r1.done()
	if !<-got {
		t.Fatal("waiter not granted after release")
	}
	r2.done()
	r3.done()
	// Larger than the budget: only alone, growing from its own holding.
	r4 := &reservation{b: b}
	if !r4.grow(ctx, 32<<10, time.Millisecond) || !r4.grow(ctx, 40<<20, time.Millisecond) {
		t.Fatal("an oversized request alone")
	}
	r5 := &reservation{b: b}
	if r5.grow(ctx, 5<<20, 10*time.Millisecond) {
		t.Fatal("admitted beside an oversized one")
	}
	r4.set(1 << 20)
	r4.done()
	if b.inUse() != 0 || b.nLarge != 0 || len(b.waiters) != 0 {
		t.Fatalf("after all: used %d, large %d, waiters %d", b.inUse(), b.nLarge, len(b.waiters))
	}
}

// TestPoolsNeverHoldABufferTwice: a buffer given back twice would be
// handed to two requests at once (one's response written over by the
// other's).
func TestPoolsNeverHoldABufferTwice(t *testing.T) {
	s := newServer(t)
	do(t, s, "DynamoDB_20120810.ListTables", `{"Limit":5}`)
	seen := map[any]bool{}
	for i := 0; i < 8; i++ {
		b := s.bufs.Get()
		if seen[b] {
			t.Fatal("the pool handed out one buffer twice")
		}
		seen[b] = true
	}
}

// TestSlowReadersAreCutOff: a client that asks for a large reply and
// never reads it is disconnected at the write deadline, and the reply's
// reservation (and memory) is released.
func TestSlowReadersAreCutOff(t *testing.T) {
	addr, s := edgeServerOf(t, nil, edgeLimits)
	mk := `{"TableName":"slow","BillingMode":"PAY_PER_REQUEST","KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],` +
		`"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}]}`
	post := func(op, body string) {
		raw := fmt.Sprintf("POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.%s\r\nContent-Length: %d\r\n\r\n%s", op, len(body), body)
		if resp, b, _ := rawExchange(t, addr, raw, 5*time.Second); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", op, resp.StatusCode, b)
		}
	}
	post("CreateTable", mk)
	var keys []string
	for i := 0; i < 40; i++ {
		post("PutItem", fmt.Sprintf(`{"TableName":"slow","Item":{"pk":{"S":"k%d"},"v":{"S":"%s"}}}`, i, strings.Repeat("v", 390<<10)))
		keys = append(keys, fmt.Sprintf(`{"pk":{"S":"k%d"}}`, i))
	}
	body := `{"RequestItems":{"slow":{"Keys":[` + strings.Join(keys, ",") + `]}}}`
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(16 << 10)
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.BatchGetItem\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// The ~15 MB reply is held while the client does not read...
	// The bounds below are far above the write deadline (1 s) because
	// the reservation comes before the reply is encoded, which takes
	// seconds under -race on a loaded machine; they are not the cut's
	// timing. Without the cut the reply would be held forever: the client
	// never reads, and 15 MB do not fit in the sockets' buffers.
	const bound = 30 * time.Second
	deadline := time.Now().Add(bound)
	for s.budget.inUse() < 8<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("the reply was never held: %d bytes reserved", s.budget.inUse())
		}
		time.Sleep(10 * time.Millisecond)
	}
	held := time.Now()
	// ...until the write deadline cuts the client off.
	for s.budget.inUse() != 0 {
		if time.Since(held) > bound {
			t.Fatalf("slow reader still holds %d bytes after %v", s.budget.inUse(), time.Since(held))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("reply held %v after the reservation", time.Since(held).Round(time.Millisecond))
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("connection not closed after the cut: %v", err)
	}
}
