package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/config"
)

// cassandraConfig is a configuration on a fresh keyspace of the Cassandra
// node named by EXTENDDB_TEST_CASSANDRA_HOSTS (dropped at the end); the
// test is skipped unless EXTENDDB_TEST_BACKENDS names cassandra, and fails
// when it does and the node is missing.
func cassandraConfig(t *testing.T) config.Config {
	t.Helper()
	if !backendtest.Requested("cassandra") {
		t.Skip("cassandra not requested (EXTENDDB_TEST_BACKENDS=cassandra with EXTENDDB_TEST_CASSANDRA_HOSTS=$(scripts/cassandra.sh start))")
	}
	hosts := os.Getenv("EXTENDDB_TEST_CASSANDRA_HOSTS")
	if hosts == "" {
		t.Fatal("EXTENDDB_TEST_BACKENDS names cassandra but EXTENDDB_TEST_CASSANDRA_HOSTS is empty")
	}
	ks := fmt.Sprintf("extenddb_srv_%d_%08x", time.Now().Unix(), rand.Uint32())
	cfg, err := LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Storage.Backend = "cassandra"
	for k, v := range map[string]string{"storage.cassandra.hosts": hosts, "storage.cassandra.keyspace": ks} {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c := gocql.NewCluster(strings.Split(hosts, ",")...)
		c.Timeout = 60 * time.Second
		if s, err := c.CreateSession(); err == nil {
			s.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec()
			s.Close()
		}
	})
	return cfg
}

// TestServeCassandra: the Cassandra backend is in the driver table:
// status reports a missing keyspace, serve refuses an unmigrated one and
// says what to run, migrate creates and migrates it (once), the server
// becomes ready and serves items and /metrics, and a backup of a table
// completes into the configured store.
func TestServeCassandra(t *testing.T) {
	cfg := cassandraConfig(t)
	ctx := context.Background()

	st, err := Status(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.Backend != "cassandra" || !strings.Contains(st.Missing, "keyspace") || len(st.Pending) == 0 || len(st.Applied) != 0 {
		t.Fatalf("status before migrate: %+v", st)
	}
	err = Run(ctx, cfg, slog.New(slog.DiscardHandler), func(net.Addr) { t.Error("served an unmigrated keyspace") })
	if !backend.IsKind(err, backend.KindSchema) || !strings.Contains(err.Error(), "migrate") {
		t.Fatalf("serve before migrate: %v", err)
	}
	applied, err := Migrate(ctx, cfg)
	if err != nil || len(applied) == 0 {
		t.Fatalf("migrate: %v %v", applied, err)
	}
	if again, err := Migrate(ctx, cfg); err != nil || len(again) != 0 {
		t.Fatalf("second migrate: %v %v", again, err)
	}
	if st, err = Status(ctx, cfg); err != nil || st.Missing != "" || len(st.Pending) != 0 || len(st.Applied) != len(applied) {
		t.Fatalf("status after migrate: %+v %v", st, err)
	}

	root := t.TempDir()
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg.Backup.Store = blobstore.Config{Kind: blobstore.KindFilesystem, Root: root}
	sctx, cancel := context.WithCancel(ctx)
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- Run(sctx, cfg, slog.New(slog.DiscardHandler), func(a net.Addr) { addrc <- a }) }()
	var base string
	select {
	case a := <-addrc:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("server did not start: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("server did not start within 60s")
	}
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("server did not stop")
		}
	}()

	if code, body := httpGet(t, base+"/ready"); code != 200 {
		t.Fatalf("/ready: %d %s", code, body)
	}
	// The GSI lag on /metrics (Cassandra's index outbox).
	if code, body := httpGet(t, base+"/metrics"); code != 200 || !strings.Contains(body, `extenddb_gsi_outbox_pending{backend="cassandra"} 0`) ||
		!strings.Contains(body, `extenddb_gsi_outbox_oldest_seconds{backend="cassandra"}`) || !strings.Contains(body, `extenddb_gsi_outbox_recovered_total{backend="cassandra"}`) {
		t.Fatalf("/metrics without the GSI outbox metrics: %d\n%s", code, body)
	}
	call := func(op, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s: %d %s", op, resp.StatusCode, b)
		}
		return resp.StatusCode, out
	}
	if code, out := call("CreateTable", `{"TableName":"tab1","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],
		"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"BillingMode":"PAY_PER_REQUEST"}`); code != 200 {
		t.Fatalf("CreateTable: %d %v", code, out)
	}
	if code, out := call("PutItem", `{"TableName":"tab1","Item":{"pk":{"S":"a"},"v":{"N":"1"}}}`); code != 200 {
		t.Fatalf("PutItem: %d %v", code, out)
	}
	if code, out := call("GetItem", `{"TableName":"tab1","Key":{"pk":{"S":"a"}},"ConsistentRead":true}`); code != 200 || fmt.Sprint(out["Item"]) != "map[pk:map[S:a] v:map[N:1]]" {
		t.Fatalf("GetItem: %d %v", code, out)
	}
	// A backup on Cassandra (snapshots and the backup catalog, ADR 0021):
	// CREATING at once, AVAILABLE when the job is done, its sidecar in the
	// configured store.
	code, out := call("CreateBackup", `{"TableName":"tab1","BackupName":"backup1"}`)
	det, _ := out["BackupDetails"].(map[string]any)
	arn, _ := det["BackupArn"].(string)
	if code != 200 || arn == "" || det["BackupStatus"] != "CREATING" {
		t.Fatalf("CreateBackup on cassandra: %d %v", code, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, out = call("DescribeBackup", `{"BackupArn":"`+arn+`"}`)
		desc, _ := out["BackupDescription"].(map[string]any)
		det, _ = desc["BackupDetails"].(map[string]any)
		if code == 200 && det["BackupStatus"] == "AVAILABLE" {
			break
		}
		if code != 200 || det["BackupStatus"] != "CREATING" || time.Now().After(deadline) {
			t.Fatalf("DescribeBackup on cassandra: %d %v", code, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var sidecars []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".sha256") {
			sidecars = append(sidecars, p)
		}
		return nil
	})
	if len(sidecars) != 1 {
		t.Fatalf("sidecars in the store after the backup: %v", sidecars)
	}
	t.Logf("CreateBackup on cassandra: %s AVAILABLE, sidecar %s", arn, sidecars[0])
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
