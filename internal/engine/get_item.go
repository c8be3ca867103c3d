package engine

import (
	"context"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/expr"
)

// GetItem reads an item.
func (e *Engine) GetItem(ctx context.Context, account string, in *GetItemInput) (*GetItemOutput, error) {
	name, err := requireTableName(in.TableName)
	if err != nil {
		return nil, err
	}
	if in.Key == nil {
		return nil, validationf("1 validation error detected: Value null at 'key' failed to satisfy constraint: Member must not be null")
	}
	if err := checkReturnConsumed(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	proj, err := e.projection(in.ProjectionExpression, in.AttributesToGet, in.ExpressionAttributeNames, nil)
	if err != nil {
		return nil, err
	}
	t, err := e.loadTable(ctx, account, name)
	if err != nil {
		return nil, err
	}
	pk, sk, err := t.keyParam(in.Key)
	if err != nil {
		return nil, err
	}
	consistent := in.ConsistentRead != nil && *in.ConsistentRead
	res, err := e.backend.GetItem(ctx, backend.GetItemParams{Table: t.ref, PK: pk, SK: sk, Eventual: !consistent})
	if err != nil {
		if e.missing(err, account, name) {
			return nil, notFound(name)
		}
		return nil, err
	}
	out := &GetItemOutput{}
	size := 0
	if res.Item != nil {
		if proj == nil {
			out.Item = res.Item
			if in.ReturnConsumedCapacity != "" && in.ReturnConsumedCapacity != "NONE" {
				it, err := decodeStored(res.Item)
				if err != nil {
					return nil, err
				}
				size = attr.ItemSize(it)
			}
		} else {
			it, err := decodeStored(res.Item)
			if err != nil {
				return nil, err
			}
			size = attr.ItemSize(it)
			out.Item = attr.EncodeItem(proj.Apply(it))
		}
	}
	out.ConsumedCapacity = capacity(in.ReturnConsumedCapacity, name, readUnits(size, consistent), false)
	return out, nil
}

// projection parses a ProjectionExpression or legacy AttributesToGet;
// nil means the whole item. With env nil a fresh environment over names
// is used and checked for unused names.
func (e *Engine) projection(pe *string, toGet []string, names map[string]string, env *expr.Env) (projector, error) {
	if err := checkExprParams([]param{{"ProjectionExpression", pe != nil}}, []param{{"AttributesToGet", toGet != nil}},
		env == nil && names != nil, false); err != nil {
		return nil, err
	}
	if toGet != nil {
		if len(toGet) == 0 {
			return nil, validationf("1 validation error detected: Value '[]' at 'attributesToGet' failed to satisfy constraint: Member must have length greater than or equal to 1")
		}
		seen := map[string]bool{}
		for _, n := range toGet {
			if err := attr.CheckName(n); err != nil {
				return nil, err
			}
			if seen[n] {
				return nil, validationf("One or more parameter values were invalid: Duplicate value in attribute name: %s", n)
			}
			seen[n] = true
		}
		return namesProjection(toGet), nil
	}
	own := env == nil
	if own && pe == nil && names != nil {
		return nil, validationf("ExpressionAttributeNames can only be specified when using expressions")
	}
	if own {
		var err error
		if env, err = expr.NewEnv(names, nil); err != nil {
			return nil, err
		}
	}
	var p projector
	if pe != nil {
		pp, err := expr.ParseProjection(*pe, env)
		if err != nil {
			return nil, err
		}
		p = pp
	}
	if own {
		if err := env.CheckUnused(); err != nil {
			return nil, err
		}
	}
	return p, nil
}
