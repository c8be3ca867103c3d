package mongodb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/txledger"
	"github.com/extenddb/extenddb/internal/backend/txledger/ledgertest"
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
		var refs [2]backend.TableRef
		acct := fmt.Sprintf("acct-%08x", rand.Uint32())
		for i := range refs {
			cr, err := b.CreateTable(t.Context(), backend.CreateTableParams{Account: acct, Name: fmt.Sprintf("ledger%d", i), Desc: []byte("d")})
			if err != nil {
				t.Fatal(err)
			}
			refs[i] = cr.Table.Ref()
		}
		return ledgertest.Env{
			Store:  txStore{b},
			Tables: refs,
			Write: func(ctx context.Context, k txledger.Key, fn backend.WriteFunc) error {
				_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: k.Table, PK: k.PK, SK: k.SK, Fn: fn})
				return err
			},
			Get: func(ctx context.Context, k txledger.Key) ([]byte, error) {
				r, err := b.GetItem(ctx, backend.GetItemParams{Table: k.Table, PK: k.PK, SK: k.SK})
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

// TestScanSettlesCommittedLock: a transaction whose coordinator died after
// its commit, before releasing its items, is rolled forward by the first
// Scan that meets its locks — from the documents as stored, not from the
// scan's projection (which leaves out the version, the index keys and the
// pending change records): the Scan answers the committed items, and the
// index keeps every entry.
func TestScanSettlesCommittedLock(t *testing.T) {
	b := openT(t, Options{LeaseDuration: 3 * time.Second})
	ctx := t.Context()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "scansettle", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	indexed := func(pk, v string) backend.WriteItemParams {
		return backend.WriteItemParams{Table: ref, PK: []byte(pk), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte(v),
				PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte("gp"), SK: []byte(pk)}, Item: []byte(v)}}}, nil
		}}
	}
	// Each try: two items with index entries (so that a release built from
	// the projection would lose them), then a transaction over them whose
	// coordinator dies after ever more store calls, until one dies between
	// its commit and its releases.
	var pair [2]string
	for after := int64(1); pair[0] == ""; after++ {
		if after > 40 {
			t.Fatal("no crash point left a committed transaction holding a lock")
		}
		a, c := fmt.Sprintf("a%02d", after), fmt.Sprintf("b%02d", after)
		for _, pk := range []string{a, c} {
			if _, err := b.WriteItem(ctx, indexed(pk, pk+"-old")); err != nil {
				t.Fatal(err)
			}
		}
		cs := &ledgertest.CrashStore{Items: txStore{b}, After: after}
		_, _ = txledger.New(cs, txledger.Options{}).TransactWrite(ctx,
			backend.TransactWriteParams{Ops: []backend.WriteItemParams{indexed(a, a+"-new"), indexed(c, c+"-new")}})
		for _, pk := range []string{a, c} {
			rec, err := txStore{b}.ReadItem(ctx, txledger.Key{Table: ref, PK: []byte(pk)})
			if err != nil {
				t.Fatal(err)
			}
			if rec.Lock == nil {
				continue
			}
			tx, err := txStore{b}.ReadTx(ctx, rec.Lock.Tx)
			if err != nil {
				t.Fatal(err)
			}
			if tx != nil && tx.State == txledger.Committed {
				pair = [2]string{a, c}
				break
			}
		}
	}
	sr, err := b.Scan(ctx, backend.ScanParams{Table: ref, Limit: 1000})
	if err != nil {
		t.Fatalf("Scan over a committed transaction's locks: %v", err)
	}
	got := map[string]string{}
	for _, r := range sr.Rows {
		got[string(r.PK)] = string(r.Item)
	}
	for _, pk := range pair {
		if got[pk] != pk+"-new" {
			t.Fatalf("Scan after the dead coordinator: %s = %q, want the committed %q", pk, got[pk], pk+"-new")
		}
	}
	q, err := b.Query(ctx, backend.QueryParams{Table: ref, Index: "g", PK: []byte("gp"), Forward: true, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]string{}
	for _, r := range q.Rows {
		idx[string(r.BasePK)] = string(r.Item)
	}
	for _, pk := range pair {
		if idx[pk] != pk+"-new" {
			t.Fatalf("index after the Scan settled the locks: %s = %q, want %q (index %v)", pk, idx[pk], pk+"-new", idx)
		}
	}
	if len(idx) != len(got) {
		t.Fatalf("index has %d entries, the table %d items: %v / %v", len(idx), len(got), idx, got)
	}
}
