package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func mustJSON[T any](t *testing.T, s string) *T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return &v
}

// TestBackgroundWorkIsObservable: a GSI backfill and TTL deletions log
// start/end lines and move their metrics.
func TestBackgroundWorkIsObservable(t *testing.T) {
	b := memSQLite(t)
	var logs lockedBuf
	reg := prometheus.NewRegistry()
	now := time.Now()
	e := New(b, Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer: reg, TableCacheTTL: 10 * time.Millisecond, SweepInterval: 20 * time.Millisecond,
		Now: func() time.Time { return now }})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); e.Stop() }()
	e.Start(ctx, []string{"000000000000"})
	const acct = "000000000000"
	if _, err := e.CreateTable(ctx, acct, mustJSON[CreateTableInput](t, `{"TableName":"bgw","BillingMode":"PAY_PER_REQUEST",
		"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}]}`)); err != nil {
		t.Fatal(err)
	}
	const items = 450
	for i := 0; i < items; i++ {
		exp := now.Unix() + 3600
		if i%3 == 0 {
			exp = now.Unix() - 10 // 150 expired
		}
		if _, err := e.PutItem(ctx, acct, mustJSON[PutItemInput](t, fmt.Sprintf(
			`{"TableName":"bgw","Item":{"pk":{"S":"k%d"},"g":{"S":"G%d"},"exp":{"N":"%d"}}}`, i, i%7, exp))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.UpdateTable(ctx, acct, mustJSON[UpdateTableInput](t, `{"TableName":"bgw",
		"AttributeDefinitions":[{"AttributeName":"g","AttributeType":"S"}],
		"GlobalSecondaryIndexUpdates":[{"Create":{"IndexName":"byG","KeySchema":[{"AttributeName":"g","KeyType":"HASH"}],"Projection":{"ProjectionType":"ALL"}}}]}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(logs.String(), "index backfill finished") }, "backfill to finish")
	if got := value(e.bgm.backfillItems); got != items {
		t.Errorf("extenddb_index_backfill_items_total = %v, want %d", got, items)
	}
	if got := value(e.bgm.backfillsFinished.WithLabelValues("done")); got != 1 {
		t.Errorf("backfills done = %v", got)
	}
	if got := value(e.bgm.backfillsRunning); got != 0 {
		t.Errorf("backfills running = %v", got)
	}
	out := logs.String()
	for _, want := range []string{`msg="index backfill started" account=000000000000 table=bgw index=byG`,
		`msg="index backfill finished" account=000000000000 table=bgw index=byG items=450`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}

	if _, err := e.UpdateTimeToLive(ctx, acct, mustJSON[UpdateTimeToLiveInput](t,
		`{"TableName":"bgw","TimeToLiveSpecification":{"Enabled":true,"AttributeName":"exp"}}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return value(e.bgm.ttlDeleted) >= items/3 }, "TTL deletions")
	waitFor(t, func() bool { return strings.Contains(logs.String(), "deleted=150") }, "the TTL pass line")
	if n := value(e.bgm.ttlDeleted); n != items/3 {
		t.Errorf("extenddb_ttl_deleted_items_total = %v, want %d", n, items/3)
	}
	if !strings.Contains(logs.String(), `index="$ttl (TimeToLive enabling)"`) {
		t.Errorf("TTL enabling backfill not logged:\n%s", logs.String())
	}
	if mfs, err := reg.Gather(); err != nil || len(mfs) < 9 {
		t.Errorf("registry: %d metric families, %v", len(mfs), err)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// value reads a counter's or gauge's current value.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}
