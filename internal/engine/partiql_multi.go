package engine

import (
	"context"
	"errors"
	"strings"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/partiql"
)

// BatchExecuteStatement and ExecuteTransaction: PartiQL statements run as
// a batch of single-item operations or as one TransactGetItems or
// TransactWriteItems.

const (
	maxBatchStatements = 25
	msgMixedBatch      = "The entire batch must consist of either read statements or write statements, you cannot mix both in one batch."
	msgMixedTx         = "The entire transaction must consist of either read statements or write statements, you cannot mix both in one transaction."
)

type BatchStatementRequest struct {
	Statement                           *string      `json:"Statement"`
	Parameters                          []attr.Value `json:"Parameters"`
	ConsistentRead                      *bool        `json:"ConsistentRead"`
	ReturnValuesOnConditionCheckFailure string       `json:"ReturnValuesOnConditionCheckFailure"`
}

type BatchExecuteStatementInput struct {
	Statements             []BatchStatementRequest `json:"Statements"`
	ReturnConsumedCapacity string                  `json:"ReturnConsumedCapacity"`
}

type BatchStatementError struct {
	Code    string    `json:"Code"`
	Message string    `json:"Message,omitempty"`
	Item    attr.Item `json:"Item,omitempty"`
}

type BatchStatementResponse struct {
	TableName string               `json:"TableName,omitempty"`
	Item      RawJSON              `json:"Item,omitempty"`
	Error     *BatchStatementError `json:"Error,omitempty"`
}

type BatchExecuteStatementOutput struct {
	Responses        []BatchStatementResponse `json:"Responses"`
	ConsumedCapacity []ConsumedCapacity       `json:"ConsumedCapacity,omitempty"`
}

type ParameterizedStatement struct {
	Statement                           *string      `json:"Statement"`
	Parameters                          []attr.Value `json:"Parameters"`
	ReturnValuesOnConditionCheckFailure string       `json:"ReturnValuesOnConditionCheckFailure"`
}

type ExecuteTransactionInput struct {
	TransactStatements     []ParameterizedStatement `json:"TransactStatements"`
	ClientRequestToken     *string                  `json:"ClientRequestToken"`
	ReturnConsumedCapacity string                   `json:"ReturnConsumedCapacity"`
}

type ExecuteTransactionOutput struct {
	Responses        []ItemResponse     `json:"Responses,omitempty"`
	ConsumedCapacity []ConsumedCapacity `json:"ConsumedCapacity,omitempty"`
}

// batchErrorCodes maps an operation's error to BatchStatementError's code.
var batchErrorCodes = map[Code]string{
	CodeConditionalCheckFailed: "ConditionalCheckFailed",
	CodeDuplicateItem:          "DuplicateItem",
	CodeValidation:             "ValidationError",
	CodeResourceNotFound:       "ResourceNotFound",
	CodeTransactionConflict:    "TransactionConflict",
	CodeThroughputExceeded:     "ProvisionedThroughputExceeded",
	CodeRequestLimitExceeded:   "RequestLimitExceeded",
	CodeItemCollectionTooLarge: "ItemCollectionSizeLimitExceeded",
	CodeInternal:               "InternalServerError",
}

// batchError turns one statement's failure into its BatchStatementError;
// errors the batch cannot carry (storage unavailable, a cancelled
// request) are returned to fail the whole request.
func batchError(err error) (*BatchStatementError, error) {
	err = FromStorage(err)
	var ee *Error
	var ae *attr.Error
	switch {
	case errors.As(err, &ee):
		code, ok := batchErrorCodes[ee.Code]
		if !ok {
			return nil, err
		}
		if ee.Code == CodeInternal {
			return nil, err
		}
		return &BatchStatementError{Code: code, Message: ee.Message, Item: ee.Item}, nil
	case errors.As(err, &ae):
		return &BatchStatementError{Code: "ValidationError", Message: ae.Message}, nil
	}
	return nil, err
}

func lengthError(member string, n, max int) error {
	if n == 0 {
		return validationf("1 validation error detected: Value '[]' at '%s' failed to satisfy constraint: Member must have length greater than or equal to 1", member)
	}
	return validationf("1 validation error detected: Value '[...]' at '%s' failed to satisfy constraint: Member must have length less than or equal to %d", member, max)
}

// BatchExecuteStatement runs up to 25 statements, all reads (each a
// SELECT of one item by its full primary key) or all writes, each on its
// own: a statement that fails has an Error in its response.
func (e *Engine) BatchExecuteStatement(ctx context.Context, account string, in *BatchExecuteStatementInput) (*BatchExecuteStatementOutput, error) {
	if in.Statements == nil {
		return nil, validationf("1 validation error detected: Value null at 'statements' failed to satisfy constraint: Member must not be null")
	}
	if len(in.Statements) == 0 || len(in.Statements) > maxBatchStatements {
		return nil, lengthError("statements", len(in.Statements), maxBatchStatements)
	}
	if err := checkReturnConsumed(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	sts := make([]*partiql.Statement, len(in.Statements))
	errs := make([]error, len(in.Statements))
	reads, writes := 0, 0
	for i, r := range in.Statements {
		st, err := e.parseStatement(r.Statement, r.Parameters)
		if err == nil {
			_, err = checkReturnValuesOnCCF(r.ReturnValuesOnConditionCheckFailure)
		}
		if err != nil {
			errs[i] = err
			continue
		}
		if st.Kind == partiql.Exists {
			errs[i] = validationf("EXISTS can only be used in ExecuteTransaction write requests.")
			continue
		}
		sts[i] = st
		if st.Kind.IsRead() {
			reads++
		} else {
			writes++
		}
	}
	if reads > 0 && writes > 0 {
		return nil, validationf(msgMixedBatch)
	}
	out := &BatchExecuteStatementOutput{Responses: make([]BatchStatementResponse, len(in.Statements))}
	var caps []ConsumedCapacity
	for i, r := range in.Statements {
		resp := &out.Responses[i]
		st := sts[i]
		err := errs[i]
		if st != nil {
			resp.TableName = st.Table
			var cc *ConsumedCapacity
			if st.Kind.IsRead() {
				resp.Item, cc, err = e.batchRead(ctx, account, st, r, in.ReturnConsumedCapacity)
			} else {
				var o *ItemOutput
				if o, err = e.execWrite(ctx, account, st, r.Parameters, in.ReturnConsumedCapacity, r.ReturnValuesOnConditionCheckFailure); err == nil {
					cc = o.ConsumedCapacity
				}
			}
			if cc != nil {
				caps = mergeCapacity(caps, *cc)
			}
		}
		if err != nil {
			be, hard := batchError(err)
			if hard != nil {
				return nil, hard
			}
			resp.Error = be
		}
	}
	out.ConsumedCapacity = caps
	return out, nil
}

func mergeCapacity(caps []ConsumedCapacity, c ConsumedCapacity) []ConsumedCapacity {
	for i := range caps {
		if caps[i].TableName == c.TableName {
			caps[i].CapacityUnits += c.CapacityUnits
			return caps
		}
	}
	return append(caps, ConsumedCapacity{TableName: c.TableName, CapacityUnits: c.CapacityUnits})
}

// batchRead runs a batch's SELECT: one item by its full primary key.
func (e *Engine) batchRead(ctx context.Context, account string, st *partiql.Statement, r BatchStatementRequest, rcc string) (RawJSON, *ConsumedCapacity, error) {
	gin, err := e.keyedRead(ctx, account, st, r.Parameters, "Select statements within BatchExecuteStatement must specify the primary key in the where clause.")
	if err != nil {
		return nil, nil, err
	}
	gin.ConsistentRead, gin.ReturnConsumedCapacity = r.ConsistentRead, rcc
	g, err := e.GetItem(ctx, account, gin)
	if err != nil {
		return nil, nil, err
	}
	return g.Item, g.ConsumedCapacity, nil
}

// keyedRead lowers a SELECT of one item by its full primary key (and
// nothing else) to a GetItem.
func (e *Engine) keyedRead(ctx context.Context, account string, st *partiql.Statement, params []attr.Value, msg string) (*GetItemInput, error) {
	if st.Index != "" {
		return nil, validationf("Reads on indices are not supported within transactions.")
	}
	t, err := e.loadTable(ctx, account, st.Table)
	if err != nil {
		return nil, err
	}
	key, rest, ok, err := fullKey(partiql.Conjuncts(st.Where), tableKeys(t), params)
	if err != nil {
		return nil, err
	}
	if !ok || len(rest) > 0 {
		return nil, validationf("%s", msg)
	}
	gin := &GetItemInput{TableName: &st.Table, Key: key}
	if st.Projection != nil {
		l := newLowering(nil)
		pe := l.projection(st.Projection)
		gin.ProjectionExpression, gin.ExpressionAttributeNames = &pe, l.names
	}
	return gin, nil
}

// ExecuteTransaction runs up to 100 statements as one transaction: all
// SELECTs (a TransactGetItems) or all writes and EXISTS checks (a
// TransactWriteItems, with ClientRequestToken idempotency).
func (e *Engine) ExecuteTransaction(ctx context.Context, account string, in *ExecuteTransactionInput) (*ExecuteTransactionOutput, error) {
	if in.TransactStatements == nil {
		return nil, validationf("1 validation error detected: Value null at 'transactStatements' failed to satisfy constraint: Member must not be null")
	}
	if len(in.TransactStatements) == 0 || len(in.TransactStatements) > maxTransactItems {
		return nil, lengthError("transactStatements", len(in.TransactStatements), maxTransactItems)
	}
	if err := checkReturnConsumed(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	sts := make([]*partiql.Statement, len(in.TransactStatements))
	reads, writes := 0, 0
	for i, r := range in.TransactStatements {
		st, err := e.parseStatement(r.Statement, r.Parameters)
		if err != nil {
			return nil, err
		}
		if _, err := checkReturnValuesOnCCF(r.ReturnValuesOnConditionCheckFailure); err != nil {
			return nil, err
		}
		sts[i] = st
		if st.Kind.IsRead() {
			reads++
		} else {
			writes++
		}
	}
	if reads > 0 && writes > 0 {
		return nil, validationf(msgMixedTx)
	}
	if reads > 0 {
		// A read changes nothing: its ClientRequestToken (the SDKs fill one
		// in) has nothing to make idempotent.
		tin := &TransactGetItemsInput{TransactItems: make([]TransactGetItem, len(sts)), ReturnConsumedCapacity: in.ReturnConsumedCapacity}
		for i, st := range sts {
			gin, err := e.keyedRead(ctx, account, st, in.TransactStatements[i].Parameters, "Select statements within ExecuteTransaction must specify the primary key in the where clause.")
			if err != nil {
				return nil, err
			}
			tin.TransactItems[i].Get = &TransactGet{TableName: gin.TableName, Key: gin.Key,
				ProjectionExpression: gin.ProjectionExpression, ExpressionAttributeNames: gin.ExpressionAttributeNames}
		}
		got, err := e.TransactGetItems(ctx, account, tin)
		if err != nil {
			return nil, err
		}
		return &ExecuteTransactionOutput{Responses: got.Responses, ConsumedCapacity: got.ConsumedCapacity}, nil
	}
	win := &TransactWriteItemsInput{TransactItems: make([]TransactWriteItem, len(sts)), ClientRequestToken: in.ClientRequestToken,
		ReturnConsumedCapacity: in.ReturnConsumedCapacity}
	for i, st := range sts {
		r := in.TransactStatements[i]
		t, err := e.loadTable(ctx, account, st.Table)
		if err != nil {
			return nil, err
		}
		item := &win.TransactItems[i]
		switch st.Kind {
		case partiql.Insert:
			p, err := insertInput(t, st, r.Parameters)
			if err != nil {
				return nil, err
			}
			item.Put = &TransactPut{TableName: p.TableName, Item: p.Item, ConditionExpression: p.ConditionExpression,
				ExpressionAttributeNames: p.ExpressionAttributeNames, ReturnValuesOnConditionCheckFailure: r.ReturnValuesOnConditionCheckFailure}
		case partiql.Update:
			u, err := updateInput(t, st, r.Parameters)
			if err != nil {
				return nil, err
			}
			item.Update = &TransactUpdate{TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
				ConditionExpression: u.ConditionExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
				ExpressionAttributeValues: u.ExpressionAttributeValues, ReturnValuesOnConditionCheckFailure: r.ReturnValuesOnConditionCheckFailure}
		case partiql.Delete:
			d, err := deleteInput(t, st, r.Parameters)
			if err != nil {
				return nil, err
			}
			item.Delete = &TransactDelete{TableName: d.TableName, Key: d.Key, ConditionExpression: d.ConditionExpression,
				ExpressionAttributeNames: d.ExpressionAttributeNames, ExpressionAttributeValues: d.ExpressionAttributeValues,
				ReturnValuesOnConditionCheckFailure: r.ReturnValuesOnConditionCheckFailure}
		case partiql.Exists:
			c, err := existsInput(t, st, r.Parameters)
			if err != nil {
				return nil, err
			}
			c.ReturnValuesOnConditionCheckFailure = r.ReturnValuesOnConditionCheckFailure
			item.ConditionCheck = c
		}
	}
	out, err := e.TransactWriteItems(ctx, account, win)
	if err != nil {
		return nil, duplicateReasons(err, sts)
	}
	return &ExecuteTransactionOutput{ConsumedCapacity: out.ConsumedCapacity}, nil
}

// existsInput lowers EXISTS(SELECT ... WHERE <full key> AND cond) to a
// ConditionCheck that the item exists and meets cond.
func existsInput(t *table, st *partiql.Statement, params []attr.Value) (*ConditionCheck, error) {
	if st.Index != "" {
		return nil, validationf("Operations on indices are not supported in transactions")
	}
	key, rest, ok, err := fullKey(partiql.Conjuncts(st.Where), tableKeys(t), params)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, validationf("EXISTS() must contain a single item read with additional condition")
	}
	l := newLowering(params)
	cond := "attribute_exists(" + l.name(t.Hash.Name) + ")"
	if len(rest) > 0 {
		c, err := l.conds(rest)
		if err != nil {
			return nil, err
		}
		cond += " AND " + c
	}
	return &ConditionCheck{TableName: &st.Table, Key: key, ConditionExpression: &cond,
		ExpressionAttributeNames: l.names, ExpressionAttributeValues: l.values}, nil
}

// duplicateReasons reports an INSERT whose key existed as DuplicateItem
// in the cancellation reasons, as DynamoDB does.
func duplicateReasons(err error, sts []*partiql.Statement) error {
	var ee *Error
	if !errors.As(err, &ee) || ee.Code != CodeTransactionCanceled || len(ee.Reasons) != len(sts) {
		return err
	}
	changed := false
	codes := make([]string, len(ee.Reasons))
	for i := range ee.Reasons {
		if sts[i].Kind == partiql.Insert && ee.Reasons[i].Code == "ConditionalCheckFailed" {
			ee.Reasons[i] = CancellationReason{Code: "DuplicateItem", Message: errDuplicateItem.Message}
			changed = true
		}
		codes[i] = ee.Reasons[i].Code
	}
	if changed {
		ee.Message = "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]"
	}
	return ee
}
