package memory

import (
	"bytes"
	"context"
	"sort"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// The change log (backend.ChangeLog): a slice of records per table,
// appended by apply under the table's write lock, so Seq order is commit
// order and a record is readable exactly when its item is. Nothing is
// kept after Close, like the items.

// appendLog appends one record (caller holds t.mu for writing). At is
// never before the previous record's, whatever the wall clock does.
func (t *table) appendLog(data []byte) {
	at := time.Now().UTC()
	if at.Before(t.lastAt) {
		at = t.lastAt
	}
	t.lastAt = at
	t.lastSeq++
	t.log = append(t.log, backend.LogRecord{Seq: t.lastSeq, At: at, Data: bytes.Clone(data)})
}

// ReadLog implements backend.ChangeLog. Data slices are the stored
// buffers, which are never written again.
func (b *Backend) ReadLog(ctx context.Context, p backend.ReadLogParams) (*backend.ReadLogResult, error) {
	if p.Limit <= 0 {
		return nil, backend.Errorf(backend.KindInternal, "memory: ReadLog limit %d", p.Limit)
	}
	t, err := b.readTable(p.Table)
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	i := sort.Search(len(t.log), func(i int) bool { return t.log[i].Seq > p.After })
	var out []backend.LogRecord
	size := 0
	for ; i < len(t.log) && len(out) < p.Limit; i++ {
		r := t.log[i]
		size += len(r.Data)
		if p.MaxBytes > 0 && size > p.MaxBytes && len(out) > 0 {
			break
		}
		out = append(out, r)
	}
	return &backend.ReadLogResult{Records: out}, nil
}

// LogInfo implements backend.ChangeLog.
func (b *Backend) LogInfo(ctx context.Context, p backend.LogInfoParams) (*backend.LogInfoResult, error) {
	t, err := b.readTable(p.Table)
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	res := &backend.LogInfoResult{Last: t.lastSeq, Count: int64(len(t.log))}
	if len(t.log) > 0 {
		res.First = t.log[0].Seq
	}
	return res, nil
}

// TrimLog implements backend.ChangeLog.
func (b *Backend) TrimLog(ctx context.Context, p backend.TrimLogParams) (*backend.TrimLogResult, error) {
	t, err := b.liveTable(p.Table)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped {
		return nil, tableNotFound(p.Table)
	}
	n := sort.Search(len(t.log), func(i int) bool { return !t.log[i].At.Before(p.Before) })
	if n > 0 {
		// A new slice, so the trimmed records' memory is released.
		t.log = append([]backend.LogRecord(nil), t.log[n:]...)
	}
	return &backend.TrimLogResult{Removed: int64(n)}, nil
}
