package engine

import (
	"context"

	"github.com/extenddb/extenddb/internal/backend"
)

// DeleteItem deletes an item.
func (e *Engine) DeleteItem(ctx context.Context, account string, in *DeleteItemInput) (*ItemOutput, error) {
	return fenced(ctx, func(ctx context.Context) (*ItemOutput, error) { return e.deleteItem(ctx, account, in) })
}

// deleteItem deletes an item.
func (e *Engine) deleteItem(ctx context.Context, account string, in *DeleteItemInput) (*ItemOutput, error) {
	name, returnOldOnCCF, cond, err := e.writePrologue(in.TableName, "key", in.Key != nil, in.ReturnValues,
		in.ReturnConsumedCapacity, in.ReturnItemCollectionMetrics, in.ReturnValuesOnConditionCheckFailure,
		in.ConditionExpression, in.Expected, in.ConditionalOperator, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if err != nil {
		return nil, err
	}
	t, pk, sk, keys, err := e.keyTarget(ctx, account, name, in.Key)
	if err != nil {
		return nil, err
	}
	res, err := e.writeItem(ctx, t, keys, backend.WriteItemParams{Table: t.ref, PK: pk, SK: sk, Fn: func(oldRaw []byte) (backend.Change, error) {
		old, err := decodeStored(oldRaw)
		if err != nil {
			return backend.Change{}, err
		}
		if cond != nil && !cond.Eval(old) {
			return backend.Change{}, ccfError(old, returnOldOnCCF)
		}
		if old == nil {
			return backend.Change{Op: backend.Keep}, nil
		}
		return t.deleteChange(old), nil
	}})
	if err != nil {
		return nil, err
	}
	out := &ItemOutput{}
	if res.Old != nil && in.ReturnValues == "ALL_OLD" {
		if out.Attributes, err = decodeStored(res.Old); err != nil {
			return nil, err
		}
	}
	if out.ConsumedCapacity, err = writeCapacity(in.ReturnConsumedCapacity, t, 0, res); err != nil {
		return nil, err
	}
	return out, nil
}
