package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// TestMongoDBServe: `serve --backend mongodb` refuses an unmigrated
// database and says what to run; `migrate` and `status` work through the
// driver table; the server becomes ready, serves items, and takes a
// backup (snapshot capability and backup catalog of the backend) that
// becomes AVAILABLE and restores.
func TestMongoDBServe(t *testing.T) {
	if !backendtest.Requested("mongodb") {
		t.Skip("mongodb not requested (EXTENDDB_TEST_BACKENDS=mongodb EXTENDDB_TEST_MONGODB_URI=$(scripts/mongodb.sh start))")
	}
	uri := os.Getenv("EXTENDDB_TEST_MONGODB_URI")
	if uri == "" {
		t.Fatal("EXTENDDB_TEST_BACKENDS names mongodb but EXTENDDB_TEST_MONGODB_URI is empty")
	}
	dbName := fmt.Sprintf("extenddb_srv_%d_%08x", time.Now().Unix(), rand.Uint32())
	t.Cleanup(func() {
		c, err := mongo.Connect(options.Client().ApplyURI(uri))
		if err == nil {
			_ = c.Database(dbName).Drop(context.Background())
			_ = c.Disconnect(context.Background())
		}
	})
	cfg, err := LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Storage.Backend = "mongodb"
	for k, v := range map[string]string{"storage.mongodb.uri": uri, "storage.mongodb.database": dbName,
		"backup.store.kind": "filesystem"} {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(k, err)
		}
	}
	root := t.TempDir()
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg.Backup.Store.Root = root
	cfg.Server.Listen = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Unmigrated: serve refuses and says what to run.
	if err := Serve(ctx, cfg, Options{}); err == nil || !strings.Contains(err.Error(), "migrate") {
		t.Fatalf("serve on an unmigrated database: %v", err)
	}
	if applied, err := Migrate(ctx, cfg); err != nil || len(applied) == 0 {
		t.Fatalf("migrate: %v %v", applied, err)
	}
	st, err := Status(ctx, cfg)
	if err != nil || len(st.Pending) != 0 || len(st.Applied) == 0 || st.Backend != "mongodb" {
		t.Fatalf("status: %+v %v", st, err)
	}
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, Options{Ready: func(a net.Addr) { addrc <- a }}) }()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	defer func() { cancel(); <-done }()
	call := func(op, body string) (int, string) {
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
		return resp.StatusCode, string(b)
	}
	resp, err := http.Get("http://" + addr.String() + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/ready: %d", resp.StatusCode)
	}
	if code, b := call("CreateTable", `{"TableName":"nobk","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],`+
		`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"BillingMode":"PAY_PER_REQUEST"}`); code != 200 {
		t.Fatalf("CreateTable: %d %s", code, b)
	}
	if code, b := call("PutItem", `{"TableName":"nobk","Item":{"pk":{"S":"a"}}}`); code != 200 {
		t.Fatalf("PutItem: %d %s", code, b)
	}
	code, b := call("CreateBackup", `{"TableName":"nobk","BackupName":"bk1"}`)
	if code != 200 {
		t.Fatalf("CreateBackup: %d %s", code, b)
	}
	var cb struct {
		BackupDetails struct{ BackupArn string }
	}
	if err := json.Unmarshal([]byte(b), &cb); err != nil || cb.BackupDetails.BackupArn == "" {
		t.Fatalf("CreateBackup answer %s: %v", b, err)
	}
	arn := cb.BackupDetails.BackupArn
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, b := call("DescribeBackup", `{"BackupArn":"`+arn+`"}`)
		if code != 200 {
			t.Fatalf("DescribeBackup: %d %s", code, b)
		}
		if strings.Contains(b, `"BackupStatus":"AVAILABLE"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backup not AVAILABLE within 60 s: %s", b)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, b := call("RestoreTableFromBackup", `{"BackupArn":"`+arn+`","TargetTableName":"nobk2"}`); code != 200 {
		t.Fatalf("RestoreTableFromBackup: %d %s", code, b)
	}
	for {
		code, b := call("GetItem", `{"TableName":"nobk2","Key":{"pk":{"S":"a"}}}`)
		if code == 200 && strings.Contains(b, `"Item"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restored item not readable within 60 s: %d %s", code, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
