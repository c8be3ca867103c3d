package backend

import (
	"context"
	"sync"
)

// TableStats implements Backend: a panic in the caller's Size function is
// answered as an error (the backend stops calling it), and the counts must
// not be negative.
func (c *checked) TableStats(ctx context.Context, p TableStatsParams) (*TableStatsResult, error) {
	var mu sync.Mutex
	var panicked error
	if size := p.Size; size != nil {
		p.Size = func(item []byte) int64 {
			mu.Lock()
			failed := panicked != nil
			mu.Unlock()
			if failed {
				return 0
			}
			n, err := recovered("the size function", func() (int64, error) { return size(item), nil })
			if err != nil {
				mu.Lock()
				panicked = err
				mu.Unlock()
			}
			return n
		}
	}
	r, err := c.b.TableStats(ctx, p)
	if panicked != nil {
		return nil, panicked
	}
	if err := c.checkErr("TableStats", err, kindsTable, nil); err != nil {
		return nil, err
	}
	if r == nil {
		return nil, c.violation("TableStats", "answered no result and no error")
	}
	if r.ItemCount < 0 || r.SizeBytes < 0 {
		return nil, c.violation("TableStats", "answered negative figures: %d items, %d bytes", r.ItemCount, r.SizeBytes)
	}
	for n, ix := range r.Indexes {
		if ix.ItemCount <= 0 || ix.SizeBytes < 0 {
			return nil, c.violation("TableStats", "index %q: %d entries, %d bytes (an index listed has entries)", n, ix.ItemCount, ix.SizeBytes)
		}
	}
	return r, nil
}
