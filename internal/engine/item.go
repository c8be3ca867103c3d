package engine

import (
	"context"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/expr"
)

var (
	errItemTooLarge       = validationf("Item size has exceeded the maximum allowed size")
	errUpdateItemTooLarge = validationf("Item size to update has exceeded the maximum allowed size")
)

func ccfError(old attr.Item, returnOld bool) *Error {
	e := newErr(CodeConditionalCheckFailed, "The conditional request failed")
	if returnOld && old != nil {
		e.Item = old
	}
	return e
}

func checkReturnValuesOnCCF(v string) (bool, error) {
	switch v {
	case "", "NONE":
		return false, nil
	case "ALL_OLD":
		return true, nil
	}
	return false, validationf("1 validation error detected: Value '%s' at 'returnValuesOnConditionCheckFailure' failed to satisfy constraint: Member must satisfy enum value set: [ALL_OLD, NONE]", v)
}

func checkReturnConsumed(v string) error {
	switch v {
	case "", "NONE", "TOTAL", "INDEXES":
		return nil
	}
	return validationf("1 validation error detected: Value '%s' at 'returnConsumedCapacity' failed to satisfy constraint: Member must satisfy enum value set: [INDEXES, TOTAL, NONE]", v)
}

func checkReturnMetrics(v string) error {
	switch v {
	case "", "NONE", "SIZE":
		return nil
	}
	return validationf("1 validation error detected: Value '%s' at 'returnItemCollectionMetrics' failed to satisfy constraint: Member must satisfy enum value set: [SIZE, NONE]", v)
}

// writeOptions validates the members every single-item write shares and
// tells whether a failed condition returns the old item. oldOnly limits
// ReturnValues to NONE and ALL_OLD (PutItem, DeleteItem).
func writeOptions(returnValues string, oldOnly bool, rcc, rim, onCCF string) (bool, error) {
	switch returnValues {
	case "", "NONE", "ALL_OLD":
	case "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW":
		if oldOnly {
			return false, validationf("ReturnValues can only be ALL_OLD or NONE")
		}
	default:
		return false, validationf("1 validation error detected: Value '%s' at 'returnValues' failed to satisfy constraint: Member must satisfy enum value set: [ALL_NEW, UPDATED_OLD, ALL_OLD, NONE, UPDATED_NEW]", returnValues)
	}
	if err := checkReturnConsumed(rcc); err != nil {
		return false, err
	}
	if err := checkReturnMetrics(rim); err != nil {
		return false, err
	}
	return checkReturnValuesOnCCF(onCCF)
}

// writeRequest checks what PutItem, DeleteItem and UpdateItem check
// first, in DynamoDB's order: the table name, the item or key (member,
// given when not null), then the return and metrics options (oldOnly:
// ReturnValues allows only NONE and ALL_OLD). It answers the table name
// and whether a failed condition returns the old item.
func writeRequest(tableName *string, member string, given bool, returnValues string, oldOnly bool, rcc, rim, onCCF string) (string, bool, error) {
	name, err := requireTableName(tableName)
	if err != nil {
		return "", false, err
	}
	if !given {
		return "", false, validationf("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", member)
	}
	returnOldOnCCF, err := writeOptions(returnValues, oldOnly, rcc, rim, onCCF)
	if err != nil {
		return "", false, err
	}
	return name, returnOldOnCCF, nil
}

// keyTarget loads the table a DeleteItem or UpdateItem names and encodes
// the key it is given; streamKeys is the key's JSON for the change record
// (nil when the table logs none: no stream, point-in-time recovery off).
func (e *Engine) keyTarget(ctx context.Context, account, name string, key attr.Item) (t *table, pk, sk, streamKeys []byte, err error) {
	if t, err = e.loadTable(ctx, account, name); err != nil {
		return nil, nil, nil, nil, err
	}
	if pk, sk, err = t.keyParam(key); err != nil {
		return nil, nil, nil, nil, err
	}
	if t.logs() {
		streamKeys = attr.EncodeItem(key)
	}
	return t, pk, sk, streamKeys, nil
}

// writeItem runs a storage write and retries once with a fresh table when
// the cached table incarnation was deleted meanwhile.
// With a stream on the table, the write also stores its record (keys is
// the item's keys JSON, see streamed).
func (e *Engine) writeItem(ctx context.Context, t *table, keys []byte, p backend.WriteItemParams) (*backend.WriteItemResult, error) {
	res, err := e.backend.WriteItem(ctx, e.streamed(t, p, keys, false))
	if e.missing(err, t.ref.Account, t.ref.Name) {
		return nil, notFound(t.ref.Name)
	}
	if err == nil && t.stream != nil {
		e.countLogged(*res)
	}
	return res, err
}

// writePrologue is the start of a PutItem and a DeleteItem: the checks of
// writeRequest (ReturnValues NONE or ALL_OLD), then the condition
// (expression or legacy Expected), in DynamoDB's order. It answers the
// table name, whether a failed condition returns the old item, and the
// condition (nil when there is none).
func (e *Engine) writePrologue(tableName *string, member string, given bool, returnValues, rcc, rim, onCCF string,
	condExpr *string, expected map[string]ExpectedAttributeValue, condOp string,
	names map[string]string, values map[string]attr.Value) (string, bool, *expr.Condition, error) {
	name, returnOldOnCCF, err := writeRequest(tableName, member, given, returnValues, true, rcc, rim, onCCF)
	if err != nil {
		return "", false, nil, err
	}
	cond, err := e.writeCondition(condExpr, expected, condOp, names, values)
	if err != nil {
		return "", false, nil, err
	}
	return name, returnOldOnCCF, cond, nil
}

// writeCondition parses a write's condition (expression or legacy).
func (e *Engine) writeCondition(condExpr *string, expected map[string]ExpectedAttributeValue, condOp string,
	names map[string]string, values map[string]attr.Value) (*expr.Condition, error) {
	if err := checkExprParams([]param{{"ConditionExpression", condExpr != nil}}, []param{{"Expected", expected != nil}},
		names != nil, values != nil); err != nil {
		return nil, err
	}
	if expected != nil {
		return legacyExpected(expected, condOp)
	}
	if err := checkCondOp(condOp, 0); err != nil {
		return nil, err
	}
	env, err := expr.NewEnv(names, values)
	if err != nil {
		return nil, err
	}
	var cond *expr.Condition
	if condExpr != nil {
		if cond, err = expr.ParseCondition(expr.KindCondition, *condExpr, env); err != nil {
			return nil, err
		}
	}
	if err := env.CheckUnused(); err != nil {
		return nil, err
	}
	return cond, nil
}
