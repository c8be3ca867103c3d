package backup

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/format"
	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/store"
)

// TestBackupThroughput measures the backup job against the format encoder
// alone on the same items (EXTENDDB_BACKUP_BENCH_ITEMS items of about 1
// KiB; skipped when unset). It reports figures; the only assertion is
// that the backup verifies.
func TestBackupThroughput(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("EXTENDDB_BACKUP_BENCH_ITEMS"))
	if n <= 0 {
		t.Skip("set EXTENDDB_BACKUP_BENCH_ITEMS to measure")
	}
	for _, bc := range backends(t) {
		t.Run(bc.name, func(t *testing.T) {
			b := bc.open(t)
			ref := createTable(t, b, "bench")
			pad := strings.Repeat("x", 1000)
			ops := make([]storage.WriteItemParams, 0, 100)
			var items [][]byte
			for i := 0; i < n; i++ {
				it := attr.Item{"pk": {Type: attr.S, Str: fmt.Sprintf("p%d", i%1000)}, "sk": {Type: attr.N, Str: strconv.Itoa(i)},
					"v": {Type: attr.S, Str: pad}}
				pk, _ := attr.KeyBytes(it["pk"])
				sk, _ := attr.KeyBytes(it["sk"])
				raw := attr.EncodeItem(it)
				if len(items) < 1000 {
					items = append(items, raw)
				}
				ops = append(ops, storage.WriteItemParams{Table: ref, PK: pk, SK: sk, Blind: true,
					Fn: func([]byte) (storage.Change, error) { return storage.Change{Op: storage.Put, Item: raw}, nil }})
				if len(ops) == 100 || i == n-1 {
					if _, err := b.TransactWrite(context.Background(), storage.TransactWriteParams{Ops: ops}); err != nil {
						t.Fatal(err)
					}
					ops = ops[:0]
				}
			}
			// The encoder alone on items of the same shape, to a discarding sink.
			desc, _ := descJSON{}.TableDescriptionJSON(&storage.Table{Desc: []byte(fmt.Sprintf(`{"TableName":"bench","KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}],"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"N"}]}`))})
			arn := format.ARN{Partition: "aws", Region: "us-east-1", Account: account, Table: "bench", BackupID: "01732908000123-1a2b3c4d"}
			discard := format.FileSinkFunc(func(ctx context.Context, key string) (io.WriteCloser, error) { return nopWC{}, nil })
			w, err := format.NewWriter(context.Background(), discard, format.WriterConfig{ARN: arn, BackupName: "x",
				Source: format.Source{Backend: "x"}, Snapshot: format.Snapshot{Kind: "x"}, SourceTable: desc, ItemOrder: format.OrderUnordered})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for i := 0; i < n; i++ {
				raw := items[i%len(items)]
				it, _ := attr.DecodeItem(raw)
				k, _ := w.Schema().KeyOf(it)
				if err := w.Append(raw, k); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			enc := time.Since(start)

			root := t.TempDir() + "/store"
			st, err := store.NewFS(root)
			if err != nil {
				t.Fatal(err)
			}
			m := newManager(t, b, st, func(c *Config) { c.TargetFileBytes = 0; c.HeartbeatInterval = time.Second; c.StaleAfter = time.Minute })
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			heap0 := ms.HeapInuse
			start = time.Now()
			rec, err := m.CreateBackup(context.Background(), account, "bench", "bench")
			if err != nil {
				t.Fatal(err)
			}
			var peak uint64
			for {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
				r, _ := m.GetBackup(context.Background(), rec.ARN)
				if r.Status != storage.BackupCreating {
					if r.Status != storage.BackupAvailable {
						t.Fatalf("backup %s: %s", r.Status, r.Message)
					}
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			job := time.Since(start)
			if _, err := Verify(context.Background(), st, rec.ARN); err != nil {
				t.Fatal(err)
			}
			mb := float64(n) * 1.05 / 1024
			t.Logf("%s: %d items of ~1 KiB: encoder alone %.2fs (%.0f MiB/s), backup job %.2fs (%.0f MiB/s), ratio %.2f; heap in use during the job peaked %d MiB above the start",
				bc.name, n, enc.Seconds(), mb/enc.Seconds(), job.Seconds(), mb/job.Seconds(), enc.Seconds()/job.Seconds(), (peak-min(peak, heap0))>>20)
		})
	}
}

type nopWC struct{}

func (nopWC) Write(p []byte) (int, error) { return len(p), nil }
func (nopWC) Close() error                { return nil }
