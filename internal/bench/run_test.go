package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// fakeServer answers just enough of the DynamoDB protocol for Run: tables
// are always ACTIVE, writes are counted, reads return canned items.
type fakeServer struct {
	noBatch     bool  // answer BatchWriteItem with UnknownOperationException
	throttleMod int64 // every n-th GetItem is throttled

	mu      sync.Mutex
	created []string
	deleted []string
	calls   map[string]int
	written atomic.Int64
	gets    atomic.Int64
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	body, _ := io.ReadAll(r.Body)
	var in map[string]any
	_ = json.Unmarshal(body, &in)
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op]++
	f.mu.Unlock()
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	fail := func(typ string) {
		reply(400, map[string]string{"__type": typ, "message": "fake " + typ})
	}
	item := map[string]any{"pk": map[string]string{"S": "r0000-00000"}, "sk": map[string]string{"S": "000"}}
	switch op {
	case "CreateTable":
		name := in["TableName"].(string)
		f.mu.Lock()
		f.created = append(f.created, name)
		f.mu.Unlock()
		reply(200, map[string]any{"TableDescription": map[string]any{"TableName": name, "TableStatus": "CREATING"}})
	case "DescribeTable":
		reply(200, map[string]any{"Table": map[string]any{"TableName": in["TableName"], "TableStatus": "ACTIVE",
			"GlobalSecondaryIndexes": []any{map[string]any{"IndexName": "gsi1", "IndexStatus": "ACTIVE"}}}})
	case "DeleteTable":
		f.mu.Lock()
		f.deleted = append(f.deleted, in["TableName"].(string))
		f.mu.Unlock()
		reply(200, map[string]any{"TableDescription": map[string]any{"TableName": in["TableName"], "TableStatus": "DELETING"}})
	case "BatchWriteItem":
		if f.noBatch {
			fail("com.amazon.coral.service#UnknownOperationException")
			return
		}
		for _, reqs := range in["RequestItems"].(map[string]any) {
			f.written.Add(int64(len(reqs.([]any))))
		}
		reply(200, map[string]any{"UnprocessedItems": map[string]any{}})
	case "PutItem":
		f.written.Add(1)
		reply(200, map[string]any{})
	case "TransactWriteItems":
		f.written.Add(int64(len(in["TransactItems"].([]any))))
		reply(200, map[string]any{})
	case "GetItem":
		if n := f.gets.Add(1); f.throttleMod > 0 && n%f.throttleMod == 0 {
			fail("com.amazonaws.dynamodb.v20120810#ThrottlingException")
			return
		}
		reply(200, map[string]any{"Item": item})
	case "Query":
		items := make([]any, 25)
		for i := range items {
			items[i] = item
		}
		reply(200, map[string]any{"Items": items, "Count": 25, "ScannedCount": 25})
	default:
		fail("com.amazon.coral.service#UnknownOperationException")
	}
}

func quickOptions(endpoint string) Options {
	return Options{
		Endpoint:    endpoint,
		Concurrency: 3,
		Duration:    300 * time.Millisecond,
		Warmup:      50 * time.Millisecond,
		Partitions:  1,
		Quiet:       true,
	}
}

func TestRunPutItemFallbackAndErrors(t *testing.T) {
	f := &fakeServer{noBatch: true, throttleMod: 7}
	srv := httptest.NewServer(f)
	defer srv.Close()
	opt := quickOptions(srv.URL)
	opt.Workloads = []string{WorkloadGetItem}
	opt.ServerPID = os.Getpid() // the fake server runs in this process
	opt.JSONPath = filepath.Join(t.TempDir(), "out.json")
	var out bytes.Buffer
	res, err := Run(context.Background(), opt, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 {
		t.Fatalf("%d results", len(res))
	}
	r := res[0]
	if r.Preload == nil || r.Preload.Method != "PutItem" || r.Preload.Items != 300 {
		t.Errorf("preload %+v", r.Preload)
	}
	if got := f.written.Load(); got != 300 {
		t.Errorf("%d items written, want 3 workers x 1 partition x 100", got)
	}
	if r.Ops == 0 || r.Items != r.Ops || r.OpsPerSec <= 0 || r.P99Micros <= 0 || r.P50Micros > r.P99Micros {
		t.Errorf("result %+v", r)
	}
	if r.ErrorsByCode["ThrottlingException"] == 0 || r.Errors != r.ErrorsByCode["ThrottlingException"] {
		t.Errorf("errors %v", r.ErrorsByCode)
	}
	if !strings.Contains(r.ErrorSamples["ThrottlingException"], "fake") {
		t.Errorf("samples %v", r.ErrorSamples)
	}
	if r.Server == nil || r.Server.PID != os.Getpid() || r.Server.PeakRSSBytes <= 0 {
		t.Errorf("server %+v", r.Server)
	}
	if len(f.created) != 1 || len(f.deleted) != 1 || f.created[0] != f.deleted[0] || f.created[0] != r.Table {
		t.Errorf("created %v deleted %v", f.created, f.deleted)
	}
	if !strings.HasPrefix(r.Table, "extenddb-bench-getitem-1kb-") {
		t.Errorf("table %q", r.Table)
	}
	b, err := os.ReadFile(opt.JSONPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep JSONReport
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Results) != 1 || rep.Results[0].Ops != r.Ops {
		t.Errorf("json %v: %s", err, b)
	}
	if !strings.Contains(out.String(), "ThrottlingException") || !strings.Contains(out.String(), "getitem-1kb") {
		t.Errorf("table output:\n%s", out.String())
	}
}

func TestRunBatchPreloadQueryAndKeep(t *testing.T) {
	f := &fakeServer{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	opt := quickOptions(srv.URL)
	opt.Workloads = []string{"query,gsi-query", WorkloadBatchWrite}
	opt.Keep = true
	res, err := Run(context.Background(), opt, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 {
		t.Fatalf("%d results", len(res))
	}
	for _, r := range res[:2] {
		if r.Preload == nil || r.Preload.Method != "BatchWriteItem" || r.Items != 25*r.Ops || r.Errors != 0 {
			t.Errorf("%s: %+v", r.Workload, r)
		}
	}
	if r := res[2]; r.Preload != nil || r.Items != 25*r.Ops || r.Ops == 0 {
		t.Errorf("batchwrite: %+v", r)
	}
	if len(f.deleted) != 0 || len(f.created) != 3 {
		t.Errorf("--keep: created %v deleted %v", f.created, f.deleted)
	}
	if f.calls["PutItem"] != 0 {
		t.Errorf("PutItem used with BatchWriteItem available")
	}
}

// TestRunMixedAndTransact: mixed reads and writes half and half; transact
// writes 4 items per TransactWriteItems.
func TestRunMixedAndTransact(t *testing.T) {
	f := &fakeServer{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	opt := quickOptions(srv.URL)
	opt.Workloads = []string{WorkloadMixed, WorkloadTransact}
	res, err := Run(context.Background(), opt, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Ops == 0 || res[0].Errors != 0 || res[1].Items != 4*res[1].Ops || res[1].Ops == 0 || res[1].Errors != 0 {
		t.Fatalf("results %+v", res)
	}
	if f.calls["GetItem"] == 0 || f.calls["PutItem"] == 0 || f.calls["TransactWriteItems"] == 0 {
		t.Fatalf("calls %v", f.calls)
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	if _, err := Run(context.Background(), Options{Workloads: []string{"nope"}}, io.Discard); err == nil || !strings.Contains(err.Error(), "unknown workload") {
		t.Errorf("unknown workload: %v", err)
	}
	if _, err := Run(context.Background(), Options{ServerPID: 1 << 30}, io.Discard); err == nil {
		t.Error("missing server pid accepted")
	}
}

func TestOptionsDefaults(t *testing.T) {
	var o Options
	if err := o.setDefaults(); err != nil {
		t.Fatal(err)
	}
	if o.Endpoint != "http://127.0.0.1:8000" || o.Concurrency != 16 || o.Duration != 10*time.Second ||
		o.Warmup != 2*time.Second || o.ItemSize != 1024 || o.PreloadWorkers != 8 ||
		strings.Join(o.Workloads, ",") != "putitem-1kb,getitem-1kb,updateitem-1kb,query" {
		t.Errorf("defaults %+v", o)
	}
	o = Options{Workloads: []string{"all"}, Warmup: -1}
	if err := o.setDefaults(); err != nil || len(o.Workloads) != len(AllWorkloads) || o.Warmup != 0 {
		t.Errorf("all: %v %v %v", err, o.Workloads, o.Warmup)
	}
}

func TestPayloadLenGivesItemSize(t *testing.T) {
	ks := keyspace{parts: 4}
	item := ks.preloadItem(15, 3, 99, strings.Repeat("x", payloadLen(1024)))
	size := 0
	for name, v := range item {
		size += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			size += len(v.Value)
		case *types.AttributeValueMemberN:
			size += 2
		}
	}
	if size < 1000 || size > 1024 {
		t.Errorf("item size about %d bytes", size)
	}
}

func TestErrorCode(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{&smithy.GenericAPIError{Code: "ValidationException"}, "ValidationException"},
		{fmt.Errorf("op: %w", &smithy.GenericAPIError{Code: "ThrottlingException"}), "ThrottlingException"},
		{context.DeadlineExceeded, "net:timeout"},
		{context.Canceled, "canceled"},
		{io.ErrUnexpectedEOF, "net:eof"},
		{&net.OpError{Op: "dial", Err: errors.New("boom")}, "net:dial"},
		{errors.New("response checksum mismatch"), "client:checksum"},
		{errors.New("weird"), "client:other"},
	}
	for _, c := range cases {
		if got := ErrorCode(c.err); got != c.want {
			t.Errorf("ErrorCode(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	if ErrorCode(nil) != "" {
		t.Error("nil error has a code")
	}
}

func TestErrorCodeConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	r := &runner{opt: Options{Endpoint: "http://" + addr, Region: "us-east-1", RequestTimeout: 5 * time.Second}}
	_, err = r.newClient(1).GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}})
	if got := ErrorCode(err); got != "net:connection-refused" {
		t.Errorf("ErrorCode(%v) = %q", err, got)
	}
}
