package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// conflicting is a real backend whose transactions meet another
// transaction in progress, as the ledger backends answer after waiting
// MaxWait (and PostgreSQL on a serialization failure): KindTransactionConflict,
// with per-operation reasons when reasons is set.
type conflicting struct {
	backend.Backend
	reasons []error
}

// Capabilities: none (the inner backend's would bypass the wrapper).
func (conflicting) Capabilities() backend.Capabilities { return backend.Capabilities{} }

func (c conflicting) TransactWrite(context.Context, backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	e := backend.Errorf(backend.KindTransactionConflict, "transaction is ongoing for the item")
	e.Reasons = c.reasons
	return nil, e
}

func (c conflicting) TransactGet(context.Context, backend.TransactGetParams) (*backend.TransactGetResult, error) {
	return nil, backend.Errorf(backend.KindTransactionConflict, "transaction is ongoing for the item")
}

// TestTransactConflictCancels: DynamoDB cancels a TransactWriteItems or
// TransactGetItems that conflicts with a transaction in progress with
// TransactionCanceledException and the reason TransactionConflict
// (TransactionConflictException is for single-item writes).
func TestTransactConflictCancels(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reasons []error
		want    []string
	}{
		{"unknown operation", nil, []string{"TransactionConflict", "TransactionConflict"}},
		{"second operation", []error{nil, backend.Errorf(backend.KindTransactionConflict, "held")}, []string{"None", "TransactionConflict"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := memSQLite(t)
			e := startEngine(t, conflicting{Backend: b, reasons: tc.reasons}, Options{SweepInterval: time.Hour})
			ctx := t.Context()
			const name = "conflicts"
			createHashTable(t, e, name)
			_, err := e.TransactWriteItems(ctx, msAccount, &TransactWriteItemsInput{TransactItems: []TransactWriteItem{
				{Put: &TransactPut{TableName: ptr(name), Item: attr.Item{"pk": sv("a")}}},
				{Put: &TransactPut{TableName: ptr(name), Item: attr.Item{"pk": sv("b")}}},
			}})
			var ee *Error
			if !errors.As(err, &ee) || ee.Code != CodeTransactionCanceled {
				t.Fatalf("TransactWriteItems: want TransactionCanceledException, got %v", err)
			}
			if len(ee.Reasons) != 2 || ee.Reasons[0].Code != tc.want[0] || ee.Reasons[1].Code != tc.want[1] {
				t.Fatalf("reasons %+v, want %v", ee.Reasons, tc.want)
			}
			_, err = e.TransactGetItems(ctx, msAccount, &TransactGetItemsInput{TransactItems: []TransactGetItem{
				{Get: &TransactGet{TableName: ptr(name), Key: attr.Item{"pk": sv("a")}}},
			}})
			if !errors.As(err, &ee) || ee.Code != CodeTransactionCanceled || len(ee.Reasons) != 1 || ee.Reasons[0].Code != "TransactionConflict" {
				t.Fatalf("TransactGetItems: want TransactionCanceledException [TransactionConflict], got %v", err)
			}
		})
	}
}
