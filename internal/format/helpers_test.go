package format

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
)

// memStore is an in-memory FileSink and FileSource.
type memStore struct {
	mu      sync.Mutex
	objects map[string][]byte
	order   []string
}

func newMemStore() *memStore { return &memStore{objects: map[string][]byte{}} }

type memWriter struct {
	s   *memStore
	key string
	buf bytes.Buffer
}

func (w *memWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }
func (w *memWriter) Close() error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.s.objects[w.key] = append([]byte(nil), w.buf.Bytes()...)
	w.s.order = append(w.s.order, w.key)
	return nil
}

func (s *memStore) Create(ctx context.Context, key string) (io.WriteCloser, error) {
	return &memWriter{s: s, key: key}, nil
}

func (s *memStore) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[key]
	if !ok {
		return nil, fmt.Errorf("mem: %s: %w", key, fs.ErrNotExist)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (s *memStore) Size(ctx context.Context, key string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[key]
	if !ok {
		return 0, fmt.Errorf("mem: %s: %w", key, fs.ErrNotExist)
	}
	return int64(len(b)), nil
}

func (s *memStore) clone() *memStore {
	c := newMemStore()
	for k, v := range s.objects {
		c.objects[k] = append([]byte(nil), v...)
	}
	return c
}

// dirSource reads objects from files under a root directory.
type dirSource string

func (d dirSource) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	return os.Open(filepath.Join(string(d), filepath.FromSlash(key)))
}

func (d dirSource) Size(ctx context.Context, key string) (int64, error) {
	fi, err := os.Stat(filepath.Join(string(d), filepath.FromSlash(key)))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

var fixedNow = time.Date(2024, 11, 29, 19, 20, 0, 123_000_000, time.UTC)

func testARN(t testing.TB, table string) ARN {
	t.Helper()
	id, err := MintBackupID(fixedNow, bytes.NewReader([]byte{0x1a, 0x2b, 0x3c, 0x4d}))
	if err != nil {
		t.Fatal(err)
	}
	return ARN{Partition: "aws", Region: "us-east-1", Account: "123456789012", Table: table, BackupID: id}
}

// tableJSON builds a TableDescription for a key shape.
func tableJSON(a ARN, hashType, rangeType string) json.RawMessage {
	ks := []map[string]string{{"AttributeName": "pk", "KeyType": "HASH"}}
	ad := []map[string]string{{"AttributeName": "pk", "AttributeType": hashType}}
	if rangeType != "" {
		ks = append(ks, map[string]string{"AttributeName": "sk", "KeyType": "RANGE"})
		ad = append(ad, map[string]string{"AttributeName": "sk", "AttributeType": rangeType})
	}
	td := map[string]any{
		"TableName":             a.Table,
		"TableArn":              a.TableARN(),
		"TableId":               "12345a12-abcd-123a-ab12-1234abc12345",
		"KeySchema":             ks,
		"AttributeDefinitions":  ad,
		"TableStatus":           "ACTIVE",
		"BillingModeSummary":    map[string]any{"BillingMode": "PAY_PER_REQUEST"},
		"ProvisionedThroughput": map[string]any{"ReadCapacityUnits": 0, "WriteCapacityUnits": 0, "NumberOfDecreasesToday": 0},
		"TableClassSummary":     map[string]any{"TableClass": "STANDARD"},
		"ItemCount":             0,
		"TableSizeBytes":        0,
	}
	b, _ := json.Marshal(td)
	return b
}

func writerConfig(a ARN, table json.RawMessage, order ItemOrder, target int64) WriterConfig {
	return WriterConfig{
		ARN: a, BackupName: "nightly", Source: Source{Backend: "sqlite", ExtenddbVersion: "0.1.0"},
		Snapshot:    Snapshot{Kind: "sqlite_wal_read_txn"},
		SourceTable: table, ItemOrder: order, TargetFileBytes: target, VerifyItems: true,
		Now: func() time.Time { return fixedNow },
	}
}

// writeBackup writes items (sorted by key when ordered) and returns the store.
func writeBackup(t testing.TB, cfg WriterConfig, items []attr.Item) (*memStore, *Result) {
	t.Helper()
	s := newMemStore()
	w, err := NewWriter(context.Background(), s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if err := w.AppendItem(it); err != nil {
			t.Fatal(err)
		}
	}
	res, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return s, res
}

func sortItems(t testing.TB, schema KeySchema, items []attr.Item) {
	sort.SliceStable(items, func(i, j int) bool {
		ki, _ := schema.KeyOf(items[i])
		kj, _ := schema.KeyOf(items[j])
		return CompareKeys(ki, kj) < 0
	})
}

func mustNum(s string) attr.Value { return attr.MustNum(s) }
