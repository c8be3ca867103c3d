package mongodb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/storage/txledger"
	"github.com/extenddb/extenddb/internal/storage/txledger/ledgertest"
)

// TestLedger runs the ledger's Store conformance suite (ledgertest) on
// MongoDB: the store contract, all-or-nothing, live and dead holders, the
// sweep, a coordinator killed after each of its steps, and concurrent
// transfers with dying coordinators.
func TestLedger(t *testing.T) {
	// A coordinator that dies mid-write leaves its item version claim for
	// one lease: a short one, below the scenario's 10 s wait.
	b := openT(t, Options{LeaseDuration: 3 * time.Second})
	ledgertest.Run(t, func(t *testing.T) ledgertest.Env {
		var refs [2]storage.TableRef
		acct := fmt.Sprintf("acct-%08x", rand.Uint32())
		for i := range refs {
			cr, err := b.CreateTable(t.Context(), storage.CreateTableParams{Account: acct, Name: fmt.Sprintf("ledger%d", i), Desc: []byte("d")})
			if err != nil {
				t.Fatal(err)
			}
			refs[i] = cr.Table.Ref()
		}
		return ledgertest.Env{
			Store:  txStore{b},
			Tables: refs,
			Write: func(ctx context.Context, k txledger.Key, fn storage.WriteFunc) error {
				_, err := b.WriteItem(ctx, storage.WriteItemParams{Table: k.Table, PK: k.PK, SK: k.SK, Fn: fn})
				return err
			},
			Get: func(ctx context.Context, k txledger.Key) ([]byte, error) {
				r, err := b.GetItem(ctx, storage.GetItemParams{Table: k.Table, PK: k.PK, SK: k.SK})
				if err != nil {
					return nil, err
				}
				return r.Item, nil
			},
			LockTimeout: 3 * time.Second, // readers wound a live coordinator after a tenth of it: FerretDB needs that long for four locks
			Transfers:   20,
		}
	})
}
