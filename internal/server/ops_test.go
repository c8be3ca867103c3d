package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend/postgres"
	"github.com/extenddb/extenddb/internal/buildinfo"
	"github.com/extenddb/extenddb/internal/config"
)

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@db:5432/x?sslmode=disable":     "postgres://u:xxxxx@db:5432/x?sslmode=disable",
		"postgres://u@db/x":                                 "postgres://u@db/x",
		"postgresql://db/x?password=secret&sslmode=require": "postgresql://db/x?password=xxxxx&sslmode=require",
		"host=db user=u password=secret dbname=x":           "host=db user=u password=xxxxx dbname=x",
		"host=db password = 'se cret' dbname=x":             "host=db password = xxxxx dbname=x",
	} {
		if got := RedactDSN(in); got != want || strings.Contains(got, "secret") || strings.Contains(got, "cret") {
			t.Errorf("RedactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStartupLogIsTruthful: the startup line names what is in use: no
// data directory in memory mode, the database path on SQLite, the DSN
// without its password on PostgreSQL.
func TestStartupLogIsTruthful(t *testing.T) {
	for _, c := range []struct{ engine, backend string }{{config.MemoryNative, "memory"}, {config.MemorySQLite, "sqlite"}} {
		cfg := config.Default()
		cfg.Storage.Memory = true
		cfg.Storage.MemoryEngine = c.engine
		line := startupLine(t, cfg)
		for _, want := range []string{"backend=" + c.backend, "memory=true", "version=v1.2.3", "commit=0123456789ab", "auth=", "tls=false", "backup_store=disabled"} {
			if !strings.Contains(line, want) {
				t.Errorf("memory (%s): %q lacks %q", c.engine, line, want)
			}
		}
		if strings.Contains(line, "data_dir") || strings.Contains(line, "path=") {
			t.Errorf("memory mode (%s) logs a data directory: %q", c.engine, line)
		}
	}
	cfg := config.Default()
	cfg.Storage.DataDir = t.TempDir()
	line := startupLine(t, cfg)
	if !strings.Contains(line, "path="+cfg.Storage.DataDir+"/extenddb.sqlite") || strings.Contains(line, "memory=") {
		t.Errorf("file: %q", line)
	}
	a := fmt.Sprint(storageAttrs(config.Config{Storage: config.Storage{Backend: "postgres",
		Sections: map[string]any{"postgres": &postgres.Config{DSN: "postgres://u:pw@h/x"}}}}))
	if !strings.Contains(a, "postgres://u:xxxxx@h/x") || strings.Contains(a, ":pw@") || strings.Contains(a, "data_dir") {
		t.Errorf("postgres: %s", a)
	}
}

func startupLine(t *testing.T, cfg config.Config) string {
	t.Helper()
	cfg.Server.Listen = "127.0.0.1:0"
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&syncWriter{w: &buf}, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		done <- Serve(ctx, cfg, Options{Logger: log, Build: buildinfo.Info{Version: "v1.2.3", Commit: "0123456789abcdef"},
			Ready: func(net.Addr) { close(started) }})
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not start")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, `msg="extenddb serving"`) {
			if !strings.Contains(buf.String(), `msg="extenddb stopped"`) {
				t.Errorf("no stop line in %s", buf.String())
			}
			return l
		}
	}
	t.Fatalf("no startup line in %s", buf.String())
	return ""
}

// syncWriter serializes writes of concurrent loggers to one buffer.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// TestMetricsEndpoint: /metrics answers the operator's questions: build,
// storage pool, item cache, tables, TTL and backfills.
func TestMetricsEndpoint(t *testing.T) {
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Storage.Memory = true
	cfg.Storage.MemoryEngine = config.MemorySQLite // the SQLite pool and item cache metrics
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, cfg, Options{Build: buildinfo.Info{Version: "v1.2.3", Commit: "abc", Go: "go1.26.8"},
			Ready: func(a net.Addr) { addrc <- a }})
	}()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatal(err)
	}
	defer func() { cancel(); <-done }()
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`extenddb_build_info{commit="abc",go="go1.26.8",version="v1.2.3"} 1`,
		`extenddb_server_info{backend="sqlite",backup_store="disabled"} 1`,
		`extenddb_storage_pool_max_connections{backend="sqlite"}`,
		`extenddb_storage_pool_in_use_connections{backend="sqlite"}`,
		`extenddb_storage_pool_waits_total{backend="sqlite"}`,
		`extenddb_item_cache_hits_total{backend="sqlite"}`,
		`extenddb_item_cache_misses_total{backend="sqlite"}`,
		`extenddb_item_cache_in_use{backend="sqlite"} 1`,
		`extenddb_tables{account="000000000000"} 0`,
		`extenddb_ttl_deleted_items_total`,
		`extenddb_ttl_backlog_items`,
		`extenddb_index_backfills_running`,
		`extenddb_index_backfill_items_total`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestWriteDeadlineEndsWithItsResponse (net/http clears a write deadline
// once its response is finished): a kept-alive connection whose
// last API response armed a write deadline still gets answers after that
// deadline has passed, from every handler (a CORS preflight included),
// and a framing error on the plain listener is a DynamoDB error.
func TestWriteDeadlineEndsWithItsResponse(t *testing.T) {
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Storage.Memory = true
	cfg.Server.WriteTimeout = config.Duration{Duration: 300 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, cfg, Options{Ready: func(a net.Addr) { addrc <- a }})
	}()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatal(err)
	}
	defer func() { cancel(); <-done }()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	roundTrip := func(req string) *http.Response {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp
	}
	list := "POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 2\r\n\r\n{}"
	if r := roundTrip(list); r.StatusCode != 200 {
		t.Fatalf("ListTables: %d", r.StatusCode)
	}
	time.Sleep(500 * time.Millisecond) // past the first response's deadline
	preflight := "OPTIONS / HTTP/1.1\r\nHost: x\r\nOrigin: http://localhost:3000\r\nAccess-Control-Request-Method: POST\r\n\r\n"
	if r := roundTrip(preflight); r.StatusCode >= 300 {
		t.Fatalf("preflight: %d", r.StatusCode)
	}
	time.Sleep(500 * time.Millisecond)
	if r := roundTrip(list); r.StatusCode != 200 {
		t.Fatalf("ListTables again: %d", r.StatusCode)
	}
	if r := roundTrip("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n"); r.StatusCode != 400 || r.Header.Get("x-amzn-RequestId") == "" {
		t.Fatalf("framing error: %d %v", r.StatusCode, r.Header)
	}
}

// TestTableMetrics: /metrics reports each table's item count and size, the
// figures DescribeTable reports.
func TestTableMetrics(t *testing.T) {
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Storage.Memory = true
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, Options{Ready: func(a net.Addr) { addrc <- a }}) }()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatal(err)
	}
	defer func() { cancel(); <-done }()
	call := func(op, body string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr.String()+"/", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", op, resp.StatusCode, b)
		}
	}
	call("CreateTable", `{"TableName":"metered","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],`+
		`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"BillingMode":"PAY_PER_REQUEST"}`)
	for _, k := range []string{"a", "b", "c"} {
		call("PutItem", `{"TableName":"metered","Item":{"pk":{"S":"`+k+`"},"v":{"S":"0123456789"}}}`)
	}
	want := `extenddb_table_items{account="000000000000",table="metered"} 3`
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr.String() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), want) && strings.Contains(string(b), `extenddb_table_size_bytes{account="000000000000",table="metered"} 42`) &&
			strings.Contains(string(b), "extenddb_table_metrics_truncated 0") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed %s:\n%s", want, grepLines(string(b), "extenddb_table"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
