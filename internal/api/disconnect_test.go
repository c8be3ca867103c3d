package api

import (
	"context"
	"net"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/sqlite"
	"github.com/extenddb/extenddb/internal/engine"
)

// stallingBackend is a real SQLite backend whose Scan holds the request
// until its context ends, standing in for any long piece of request work.
type stallingBackend struct {
	*sqlite.Backend
	entered  chan struct{}
	released chan time.Time
}

func (b *stallingBackend) Scan(ctx context.Context, p backend.ScanParams) (*backend.ScanResult, error) {
	b.entered <- struct{}{}
	<-ctx.Done()
	b.released <- time.Now()
	return nil, ctx.Err()
}

// TestClientDisconnectStopsWork: the request's context reaches the engine
// and the backend, so the work of a client that goes away stops at once
// (the acceptance bound is 100 ms) instead of running to its end.
func TestClientDisconnectStopsWork(t *testing.T) {
	sb, err := sqlite.Open(context.Background(), sqlite.Options{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	b := &stallingBackend{Backend: sb, entered: make(chan struct{}, 1), released: make(chan time.Time, 1)}
	s := New(engine.New(b, engine.Options{}), Options{Ready: sb.Ping})
	srv := httptest.NewServer(s)
	defer srv.Close()

	create := `{"TableName":"tbl","AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],` +
		`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"BillingMode":"PAY_PER_REQUEST"}`
	if w := do(t, s, "DynamoDB_20120810.CreateTable", create); w.Code != 200 {
		t.Fatalf("CreateTable: %d %s", w.Code, w.Body.String())
	}
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	body := `{"TableName":"tbl"}`
	req := "POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.Scan\r\n" +
		"Content-Type: application/x-amz-json-1.0\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the Scan never reached the backend")
	}
	closed := time.Now()
	conn.Close()
	select {
	case at := <-b.released:
		if d := at.Sub(closed); d > 100*time.Millisecond {
			t.Fatalf("backend work went on %v after the client left", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("backend work did not stop after the client left")
	}
}
