package engine

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// noMultiItem is a real backend that answers KindUnsupported to
// TransactWrite, as a backend without multi-item atomicity does (the
// Cassandra backend until the transaction ledger is wired in).
type noMultiItem struct{ backend.Backend }

// Capabilities: none (the inner backend's would bypass the wrapper).
func (noMultiItem) Capabilities() backend.Capabilities { return backend.Capabilities{} }

func (noMultiItem) TransactWrite(context.Context, backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	return nil, backend.Errorf(backend.KindUnsupported, "no multi-item transactions")
}

func (noMultiItem) TransactGet(context.Context, backend.TransactGetParams) (*backend.TransactGetResult, error) {
	return nil, backend.Errorf(backend.KindUnsupported, "no multi-item transactions")
}

// TestBackgroundWithoutTransactions: the TTL sweeper, index backfills,
// BatchWriteItem and BatchGetItem write (read) independent items; on a backend without multi-item
// transactions they write them one by one, so TTL, new indexes and batch
// writes work there too.
func TestBackgroundWithoutTransactions(t *testing.T) {
	b := memSQLite(t)
	e := startEngine(t, checked(t, noMultiItem{b}), Options{SweepInterval: time.Hour})
	ctx := t.Context()
	const name = "no-multi-item"
	createHashTable(t, e, name)
	now := time.Now().Unix()
	for i := 0; i < 30; i++ {
		exp := now + 3600
		if i%3 == 0 {
			exp = now - 10
		}
		ok(t)(e.PutItem(ctx, msAccount, &PutItemInput{TableName: ptr(name), Item: attr.Item{"pk": sv(fmt.Sprintf("k%02d", i)),
			"exp": attr.MustNum(strconv.FormatInt(exp, 10)), "g": sv("x")}}))
	}
	// BatchWriteItem: a put and a delete.
	ok(t)(e.BatchWriteItem(ctx, msAccount, &BatchWriteItemInput{RequestItems: map[string][]WriteRequest{name: {
		{PutRequest: &PutRequest{Item: attr.Item{"pk": sv("batch"), "g": sv("y")}}},
		{DeleteRequest: &DeleteRequest{Key: attr.Item{"pk": sv("batch-absent")}}},
	}}}))
	if out, err := e.GetItem(ctx, msAccount, &GetItemInput{TableName: ptr(name), Key: attr.Item{"pk": sv("batch")}}); err != nil || out.Item == nil {
		t.Fatalf("item of BatchWriteItem: %v %v", out, err)
	}
	// BatchGetItem reads item by item; TransactGetItems and
	// TransactWriteItems say clearly that the backend cannot.
	bg, err := e.BatchGetItem(ctx, msAccount, &BatchGetItemInput{RequestItems: map[string]KeysAndAttributes{name: {
		Keys: []attr.Item{{"pk": sv("batch")}, {"pk": sv("k01")}, {"pk": sv("absent")}}}}})
	if err != nil || len(bg.Responses[name]) != 2 {
		t.Fatalf("BatchGetItem: %v %v", bg, err)
	}
	_, err = e.TransactGetItems(ctx, msAccount, &TransactGetItemsInput{TransactItems: []TransactGetItem{{Get: &TransactGet{TableName: ptr(name), Key: attr.Item{"pk": sv("batch")}}}}})
	if code(FromStorage(err)) != CodeValidation {
		t.Fatalf("TransactGetItems without multi-item reads: %v", err)
	}
	// Backfills: the TTL index and a GSI over items that exist.
	ok(t)(e.UpdateTimeToLive(ctx, msAccount, &UpdateTimeToLiveInput{TableName: ptr(name),
		TimeToLiveSpecification: &TimeToLiveSpecification{Enabled: ptr(true), AttributeName: ptr("exp")}}))
	waitBackfilled(t, e, name, 10*time.Second)
	addGSI(t, e, name, "by-g", "g", "S")
	tb := waitBackfilled(t, e, name, 10*time.Second)
	q, err := e.Query(ctx, msAccount, &QueryInput{TableName: ptr(name), IndexName: ptr("by-g"),
		KeyConditionExpression: ptr("g = :g"), ExpressionAttributeValues: attr.Item{":g": sv("x")}})
	if err != nil || q.Count != 30 {
		t.Fatalf("GSI after backfill: %v %v", q, err)
	}
	st, err := e.sweepTable(ctx, tb)
	if err != nil || st.deleted != 10 {
		t.Fatalf("sweep: %+v %v", st, err)
	}
	for i := 0; i < 30; i++ {
		out, err := e.GetItem(ctx, msAccount, &GetItemInput{TableName: ptr(name), Key: attr.Item{"pk": sv(fmt.Sprintf("k%02d", i))}})
		if err != nil {
			t.Fatal(err)
		}
		if gone := out.Item == nil; gone != (i%3 == 0) {
			t.Fatalf("item k%02d: gone=%v after the sweep", i, gone)
		}
	}
}

// perItemOnly is a real backend that declares per-item atomicity
// (backend.Capabilities.PerItemAtomic, as MongoDB and Cassandra, whose
// TransactWrite runs on the transaction ledger) and counts its
// TransactWrite calls.
type perItemOnly struct {
	backend.Backend
	transacts *atomic.Int64
}

func (perItemOnly) Capabilities() backend.Capabilities {
	return backend.Capabilities{PerItemAtomic: true}
}

func (p perItemOnly) TransactWrite(ctx context.Context, tp backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	p.transacts.Add(1)
	return p.Backend.TransactWrite(ctx, tp)
}

// TestIndependentWritesItemByItemOnLedgerBackends: BatchWriteItem's
// independent writes go item by item on a backend whose only atomic write
// is one item's, never as a ledger transaction (on a loaded FerretDB such
// a transaction of 25 items outlived the ledger's lock timeout and the
// batch failed with TransactionConflict); TransactWriteItems still uses
// TransactWrite.
func TestIndependentWritesItemByItemOnLedgerBackends(t *testing.T) {
	b := memSQLite(t)
	var n atomic.Int64
	e := startEngine(t, checked(t, perItemOnly{b, &n}), Options{SweepInterval: time.Hour})
	ctx := t.Context()
	const name = "per-item"
	createHashTable(t, e, name)
	var reqs []WriteRequest
	for i := range 25 {
		reqs = append(reqs, WriteRequest{PutRequest: &PutRequest{Item: attr.Item{"pk": sv(fmt.Sprintf("k%02d", i))}}})
	}
	ok(t)(e.BatchWriteItem(ctx, msAccount, &BatchWriteItemInput{RequestItems: map[string][]WriteRequest{name: reqs}}))
	if c := n.Load(); c != 0 {
		t.Fatalf("BatchWriteItem ran %d TransactWrite calls on a per-item backend", c)
	}
	for i := range 25 {
		out, err := e.GetItem(ctx, msAccount, &GetItemInput{TableName: ptr(name), Key: attr.Item{"pk": sv(fmt.Sprintf("k%02d", i))}})
		if err != nil || out.Item == nil {
			t.Fatalf("item k%02d: %v %v", i, out, err)
		}
	}
	ok(t)(e.TransactWriteItems(ctx, msAccount, &TransactWriteItemsInput{TransactItems: []TransactWriteItem{
		{Put: &TransactPut{TableName: ptr(name), Item: attr.Item{"pk": sv("t1")}}},
		{Put: &TransactPut{TableName: ptr(name), Item: attr.Item{"pk": sv("t2")}}},
	}}))
	if c := n.Load(); c != 1 {
		t.Fatalf("TransactWriteItems: %d TransactWrite calls, want 1", c)
	}
}
