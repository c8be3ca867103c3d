package backend

import "context"

// TableCounter keeps each table's statistics (the figures TableStats
// computes) up to date with every write, so reading them costs the same
// whatever the table's size (Capabilities.Counts, ADR 0053).
//
// The figures count the live items and each secondary index's entries
// and sum the backend's item size function over their stored bytes
// (ItemSize, given when the backend is opened: DriverEnv.ItemSize; the
// byte length when none). Every write changes them by its own delta in
// its own atomic write: a put that creates an item adds one item and its
// size, an overwrite adds the difference of the sizes, a delete removes
// the item; index entries likewise; a write that fails or keeps changes
// nothing; DeleteTable forgets them with the table, DropIndex with the
// index. So after a crash the figures are those of the committed writes.
//
// Figures may be unknown (Counted false): for a table written before the
// backend counted (an upgraded database) and after a BulkLoad (which
// writes without reading what it replaces). Recount then makes them
// known again without stopping writes; it is also the repair of figures
// believed wrong.
type TableCounter interface {
	// Counts answers a table's maintained figures without reading its
	// items. KindTableNotFound when the table is not live.
	Counts(ctx context.Context, p CountsParams) (*CountsResult, error)
	// Recount reads the whole table at one instant, counts it with the
	// backend's item size function and sets the maintained figures to
	// that count plus the deltas of the writes committed after that
	// instant: exact while writes go on. The answer is the figures after
	// it (nothing is set when a BulkLoad or a description change ran
	// meanwhile: figures unknown before stay unknown, and the caller
	// recounts later).
	// KindTableNotFound when the table is not live.
	Recount(ctx context.Context, p CountsParams) (*CountsResult, error)
}

type CountsParams struct {
	Table TableRef
}

type CountsResult struct {
	// Counted: the figures are known. When false, Stats is whatever the
	// backend has (partial deltas) and must not be shown as the table's.
	Counted bool
	Stats   TableStatsResult
}

// ItemSizeFunc measures one stored item or index entry for the table
// statistics (the server passes the engine's DynamoDB item size). It
// must not retain its argument and must be a pure function of it: a
// backend that counts measures an item when it is written and again when
// it is replaced or deleted.
type ItemSizeFunc func(item []byte) int64

// SizeOf measures item with f, or by its length when f is nil.
func (f ItemSizeFunc) SizeOf(item []byte) int64 {
	if f == nil {
		return int64(len(item))
	}
	return f(item)
}

// checkedCounts is a TableCounter under the Checked contract checks: an
// answer or an error, no negative figure, no index listed without
// entries.
type checkedCounts struct {
	c  *checked
	tc TableCounter
}

func (cc checkedCounts) Counts(ctx context.Context, p CountsParams) (*CountsResult, error) {
	r, err := cc.tc.Counts(ctx, p)
	return cc.check("Counts", r, err)
}

func (cc checkedCounts) Recount(ctx context.Context, p CountsParams) (*CountsResult, error) {
	r, err := cc.tc.Recount(ctx, p)
	return cc.check("Recount", r, err)
}

func (cc checkedCounts) check(method string, r *CountsResult, err error) (*CountsResult, error) {
	if err := cc.c.checkErr(method, err, kindsTable, nil); err != nil {
		return nil, err
	}
	if r == nil {
		return nil, cc.c.violation(method, "answered no result and no error")
	}
	if !r.Counted {
		return r, nil
	}
	if r.Stats.ItemCount < 0 || r.Stats.SizeBytes < 0 {
		return nil, cc.c.violation(method, "answered negative figures: %d items, %d bytes", r.Stats.ItemCount, r.Stats.SizeBytes)
	}
	for n, ix := range r.Stats.Indexes {
		if ix.ItemCount <= 0 || ix.SizeBytes < 0 {
			return nil, cc.c.violation(method, "index %q: %d entries, %d bytes (an index listed has entries)", n, ix.ItemCount, ix.SizeBytes)
		}
	}
	return r, nil
}
