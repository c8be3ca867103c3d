package ledgertest

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/txledger"
)

// errCrash is what a dead coordinator's store answers.
var errCrash = backend.Errorf(backend.KindUnavailable, "ledgertest: coordinator crashed")

// CrashStore lets a coordinator make After store calls, then fails every
// call from it: the coordinator dies between two steps (its later calls
// never reach the store). With Mid, the call that crosses the limit
// reaches the store and then fails (the write happened; the coordinator
// does not know).
type CrashStore struct {
	txledger.Items
	After int64
	Mid   bool
	n     atomic.Int64
}

// Calls is how many calls the coordinator made (those refused included).
func (c *CrashStore) Calls() int64 { return c.n.Load() }

func (c *CrashStore) step() (crossed, dead bool) {
	n := c.n.Add(1)
	return n == c.After+1 && c.Mid, n > c.After
}

func (c *CrashStore) ReadItem(ctx context.Context, k txledger.Key) (txledger.Record, error) {
	if _, dead := c.step(); dead {
		return txledger.Record{}, errCrash
	}
	return c.Items.ReadItem(ctx, k)
}

func (c *CrashStore) LockItem(ctx context.Context, k txledger.Key, cur txledger.Record, tx txledger.TxID, ch backend.Change) (txledger.Record, bool, error) {
	if crossed, dead := c.step(); dead {
		if crossed {
			_, _, _ = c.Items.LockItem(ctx, k, cur, tx, ch)
		}
		return txledger.Record{}, false, errCrash
	}
	return c.Items.LockItem(ctx, k, cur, tx, ch)
}

func (c *CrashStore) ReleaseItem(ctx context.Context, k txledger.Key, cur txledger.Record, commit bool) (bool, error) {
	if crossed, dead := c.step(); dead {
		if crossed {
			_, _ = c.Items.ReleaseItem(ctx, k, cur, commit)
		}
		return false, errCrash
	}
	return c.Items.ReleaseItem(ctx, k, cur, commit)
}

func (c *CrashStore) CreateTx(ctx context.Context, tx txledger.TxRecord) error {
	if crossed, dead := c.step(); dead {
		if crossed {
			_ = c.Items.CreateTx(ctx, tx)
		}
		return errCrash
	}
	return c.Items.CreateTx(ctx, tx)
}

func (c *CrashStore) ReadTx(ctx context.Context, id txledger.TxID) (*txledger.TxRecord, error) {
	if _, dead := c.step(); dead {
		return nil, errCrash
	}
	return c.Items.ReadTx(ctx, id)
}

func (c *CrashStore) SetTxState(ctx context.Context, id txledger.TxID, from, to txledger.State) (bool, error) {
	if crossed, dead := c.step(); dead {
		if crossed {
			_, _ = c.Items.SetTxState(ctx, id, from, to)
		}
		return false, errCrash
	}
	return c.Items.SetTxState(ctx, id, from, to)
}

func (c *CrashStore) TouchTx(ctx context.Context, id txledger.TxID, at time.Time) (bool, error) {
	if crossed, dead := c.step(); dead {
		if crossed {
			_, _ = c.Items.TouchTx(ctx, id, at)
		}
		return false, errCrash
	}
	return c.Items.TouchTx(ctx, id, at)
}

func (c *CrashStore) DeleteTx(ctx context.Context, id txledger.TxID) error {
	if crossed, dead := c.step(); dead {
		if crossed {
			_ = c.Items.DeleteTx(ctx, id)
		}
		return errCrash
	}
	return c.Items.DeleteTx(ctx, id)
}

func (c *CrashStore) ListTx(ctx context.Context, before time.Time, limit int) ([]txledger.TxRecord, error) {
	if _, dead := c.step(); dead {
		return nil, errCrash
	}
	return c.Items.ListTx(ctx, before, limit)
}
