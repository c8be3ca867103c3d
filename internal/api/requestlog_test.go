package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/extenddb/extenddb/internal/backend/sqlite"
	"github.com/extenddb/extenddb/internal/engine"
)

// logBuffer collects JSON log lines from concurrent handlers.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == "request" {
			out = append(out, m)
		}
	}
	return out
}

// logServer is a real server (SQLite in memory, SigV4 with testKey) behind
// the request log at level, and an SDK client signing with testKey.
func logServer(t *testing.T, level slog.Level, slow time.Duration) (*logBuffer, *dynamodb.Client, string) {
	t.Helper()
	b, err := sqlite.Open(context.Background(), sqlite.Options{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	lb := &logBuffer{}
	log := slog.New(slog.NewJSONHandler(lb, &slog.HandlerOptions{Level: level}))
	h := New(engine.New(b, engine.Options{}), Options{Logger: log, Ready: b.Ping, Auth: NewAuthenticator([]AccessKey{testKey})})
	ts := httptest.NewServer(WithRequestLog(h, RequestLogOptions{Logger: log, SlowThreshold: slow}))
	t.Cleanup(ts.Close)
	cl := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(testKey.AccessKeyID, testKey.SecretAccessKey, "session-token-secret-0003"),
	})
	return lb, cl, ts.URL
}

// TestRequestLogLines: at debug every request has one line with the
// operation, table, status, error type, duration, sizes, request id and
// account; no item value, key value, expression value or secret appears.
func TestRequestLogLines(t *testing.T) {
	lb, cl, url := logServer(t, slog.LevelDebug, 0)
	ctx := context.Background()
	const tbl = "LogTable"
	if _, err := cl.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(tbl), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}}}); err != nil {
		t.Fatal(err)
	}
	item := map[string]types.AttributeValue{
		"pk":        &types.AttributeValueMemberS{Value: "key-value-SECRET1"},
		"TableName": &types.AttributeValueMemberS{Value: "attr-value-SECRET2"},
		"m":         &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"TableName": &types.AttributeValueMemberS{Value: "nested-SECRET3"}}},
	}
	if _, err := cl.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: item}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tbl),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "key-value-SECRET1"}}}); err != nil {
		t.Fatal(err)
	}
	// A failed condition (expected outcome) and a validation error.
	_, err := cl.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(pk) OR v = :v"), ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "expr-value-SECRET4"}}})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("want ConditionalCheckFailed, got %v", err)
	}
	_, err = cl.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("missing-table"),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "key-value-SECRET5"}}})
	if err == nil {
		t.Fatal("GetItem on a missing table succeeded")
	}
	if _, err := cl.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		tbl: {{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "batch-SECRET6"}}}}}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	out := lb.String()
	for _, secret := range []string{"SECRET", testKey.SecretAccessKey, "session-token-secret", "Signature=", "Credential="} {
		if strings.Contains(out, secret) {
			t.Errorf("the log contains %q:\n%s", secret, out)
		}
	}
	lines := lb.lines(t)
	want := []struct {
		op, table, errType, level string
		status                    float64
	}{
		{"CreateTable", tbl, "", "DEBUG", 200},
		{"PutItem", tbl, "", "DEBUG", 200},
		{"GetItem", tbl, "", "DEBUG", 200},
		{"PutItem", tbl, "ConditionalCheckFailedException", "DEBUG", 400},
		{"GetItem", "missing-table", "ResourceNotFoundException", "INFO", 400},
		{"BatchWriteItem", tbl, "", "DEBUG", 200},
	}
	if len(lines) != len(want)+1 {
		t.Fatalf("%d request lines, want %d:\n%s", len(lines), len(want)+1, out)
	}
	for i, w := range want {
		l := lines[i]
		if l["operation"] != w.op || l["table"] != w.table || l["status"] != w.status || l["level"] != w.level {
			t.Errorf("line %d: %v; want %+v", i, l, w)
		}
		if (w.errType == "" && l["error"] != nil) || (w.errType != "" && l["error"] != w.errType) {
			t.Errorf("line %d: error %v, want %q", i, l["error"], w.errType)
		}
		if l["account"] != testKey.Account {
			t.Errorf("line %d: account %v", i, l["account"])
		}
		if id, _ := l["request_id"].(string); len(id) < 16 {
			t.Errorf("line %d: request_id %v", i, l["request_id"])
		}
		if d, ok := l["duration_ms"].(float64); !ok || d < 0 {
			t.Errorf("line %d: duration_ms %v", i, l["duration_ms"])
		}
		if n, _ := l["bytes_in"].(float64); n <= 0 {
			t.Errorf("line %d: bytes_in %v", i, l["bytes_in"])
		}
		if n, _ := l["bytes_out"].(float64); n <= 0 {
			t.Errorf("line %d: bytes_out %v", i, l["bytes_out"])
		}
	}
	if h := lines[len(want)]; h["path"] != "/health" || h["status"] != 200.0 || h["operation"] != nil {
		t.Errorf("health line: %v", h)
	}
}

// TestRequestLogAtInfo: at info only errors and slow requests are logged.
func TestRequestLogAtInfo(t *testing.T) {
	lb, cl, _ := logServer(t, slog.LevelInfo, 0)
	ctx := context.Background()
	if _, err := cl.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("nope")}); err == nil {
		t.Fatal("DescribeTable of a missing table succeeded")
	}
	lines := lb.lines(t)
	if len(lines) != 1 || lines[0]["operation"] != "DescribeTable" || lines[0]["error"] != "ResourceNotFoundException" {
		t.Fatalf("info lines: %v", lines)
	}

	lb, cl, _ = logServer(t, slog.LevelInfo, time.Nanosecond)
	if _, err := cl.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
	lines = lb.lines(t)
	if len(lines) != 1 || lines[0]["operation"] != "ListTables" || lines[0]["slow"] != true || lines[0]["level"] != "INFO" {
		t.Fatalf("slow lines: %v", lines)
	}
}

func TestTableNameOf(t *testing.T) {
	big := strings.Repeat("x", 200<<10)
	for body, want := range map[string]string{
		`{"TableName":"T1","Item":{}}`:                             "T1",
		`{ "TableName" : "T-2.x" }`:                                "T-2.x",
		`{"Item":{"TableName":{"S":"v"}},"TableName":"T3"}`:        "T3",
		`{"Item":{"a":{"S":"` + big + `"}},"TableName":"T4"}`:      "T4",
		`{"RequestItems":{"T5":{"Keys":[]}}}`:                      "T5",
		`{"TransactItems":[{"Put":{"TableName":"T6","Item":{}}}]}`: "T6",
		`{"ExpressionAttributeNames":{"#a":"TableName"},"Key":{}}`: "",
		`{"TableName":"bad\"name"}`:                                "",
		`{"Item":{"s":{"S":"\"TableName\":\"leak\""}}}`:            "",
		`{"Limit":5}`: "",
	} {
		if got := tableNameOf([]byte(body)); got != want {
			t.Errorf("tableNameOf(%.60q) = %q, want %q", body, got, want)
		}
	}
}

// TestRequestLogKeepsResponseController: handlers behind the request log
// can still set per-request deadlines (http.ResponseController reaches the
// connection through Unwrap).
func TestRequestLogKeepsResponseController(t *testing.T) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(time.Second)); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if err := rc.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.WriteHeader(200)
	})
	log := slog.New(slog.NewTextHandler(&logBuffer{}, nil))
	ts := httptest.NewServer(WithRequestLog(WithCORS(inner, []string{"*"}), RequestLogOptions{Logger: log}))
	defer ts.Close()
	resp, err := http.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}
