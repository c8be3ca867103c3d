package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/engine"
)

// Wire error type prefixes.
const (
	prefixValidate = "com.amazon.coral.validate#"
	prefixService  = "com.amazon.coral.service#"
	prefixDynamo   = "com.amazonaws.dynamodb.v20120810#"
	prefixStreams  = "com.amazonaws.dynamodb.v20120810#"
)

// wireError is one row of the error table: the __type and HTTP status a
// DynamoDB error name goes out with.
type wireError struct {
	prefix string
	status int
}

// errorTable maps every engine code to its wire form. It is the only
// place that decides __type prefixes and statuses.
var errorTable = map[engine.Code]wireError{
	engine.CodeValidation:             {prefixValidate, 400},
	engine.CodeSerialization:          {prefixService, 400},
	engine.CodeResourceNotFound:       {prefixDynamo, 400},
	engine.CodeResourceInUse:          {prefixDynamo, 400},
	engine.CodeConditionalCheckFailed: {prefixDynamo, 400},
	engine.CodeTransactionCanceled:    {prefixDynamo, 400},
	engine.CodeTransactionConflict:    {prefixDynamo, 400},
	engine.CodeTransactionInProgress:  {prefixDynamo, 400},
	engine.CodeIdempotentMismatch:     {prefixDynamo, 400},
	engine.CodeLimitExceeded:          {prefixDynamo, 400},
	engine.CodeThroughputExceeded:     {prefixDynamo, 400},
	engine.CodeRequestLimitExceeded:   {prefixDynamo, 400},
	engine.CodeItemCollectionTooLarge: {prefixDynamo, 400},
	engine.CodeTableNotFound:          {prefixDynamo, 400},
	engine.CodeTableAlreadyExists:     {prefixDynamo, 400},
	engine.CodeTableInUse:             {prefixDynamo, 400},
	engine.CodeBackupNotFound:         {prefixDynamo, 400},
	engine.CodeBackupInUse:            {prefixDynamo, 400},
	engine.CodeServiceUnavailable:     {prefixService, 503},
	engine.CodeInternal:               {prefixDynamo, 500},
	engine.CodeDuplicateItem:          {prefixDynamo, 400},

	engine.CodeContinuousBackupsUnavailable: {prefixDynamo, 400},
	engine.CodePITRUnavailable:              {prefixDynamo, 400},
	engine.CodeInvalidRestoreTime:           {prefixDynamo, 400},
	engine.CodeInvalidExportTime:            {prefixDynamo, 400},
	engine.CodeExportConflict:               {prefixDynamo, 400},
	engine.CodeExportNotFound:               {prefixDynamo, 400},
	engine.CodeImportConflict:               {prefixDynamo, 400},
	engine.CodeImportNotFound:               {prefixDynamo, 400},

	// DynamoDB Streams.
	engine.CodeExpiredIterator:   {prefixStreams, 400},
	engine.CodeTrimmedDataAccess: {prefixStreams, 400},
}

// Protocol-level errors that the engine never produces.
const (
	codeUnknownOperation = "UnknownOperationException"
	codeTooLarge         = "RequestEntityTooLargeException"
)

// errorBody is the wire error document.
type errorBody struct {
	Type                string                      `json:"__type"`
	Message             string                      `json:"message"`
	Item                attr.Item                   `json:"Item,omitempty"`
	CancellationReasons []engine.CancellationReason `json:"CancellationReasons,omitempty"`
}

// mapError turns any error into its wire status and body. internal is true
// when the cause must be logged and hidden from the client.
func mapError(err error) (status int, body errorBody, internal bool) {
	err = engine.FromStorage(err)
	var ee *engine.Error
	var ae *attr.Error
	var syn *json.SyntaxError
	var ute *json.UnmarshalTypeError
	switch {
	case errors.As(err, &ee):
		w, ok := errorTable[ee.Code]
		if !ok {
			w = errorTable[engine.CodeInternal]
		}
		body = errorBody{Type: w.prefix + string(ee.Code), Message: ee.Message, Item: ee.Item, CancellationReasons: ee.Reasons}
		return w.status, body, ee.Code == engine.CodeInternal
	case errors.As(err, &ae):
		code := engine.CodeValidation
		if ae.Kind == attr.KindSerialization {
			code = engine.CodeSerialization
		}
		w := errorTable[code]
		return w.status, errorBody{Type: w.prefix + string(code), Message: ae.Message}, false
	case errors.As(err, &syn):
		w := errorTable[engine.CodeSerialization]
		return w.status, errorBody{Type: w.prefix + string(engine.CodeSerialization), Message: "Malformed JSON in request body"}, false
	case errors.As(err, &ute):
		w := errorTable[engine.CodeSerialization]
		msg := "Unexpected value type in payload"
		if ute.Field != "" {
			msg = "Unexpected value type for member " + ute.Field + ": expected " + ute.Type.String() + ", got " + ute.Value
		}
		return w.status, errorBody{Type: w.prefix + string(engine.CodeSerialization), Message: msg}, false
	}
	w := errorTable[engine.CodeInternal]
	return w.status, errorBody{Type: w.prefix + string(engine.CodeInternal), Message: "Internal server error"}, true
}

func protocolError(code string, msg string) (int, errorBody) {
	switch code {
	case codeUnknownOperation:
		return http.StatusBadRequest, errorBody{Type: prefixService + code, Message: msg}
	case codeTooLarge:
		return http.StatusRequestEntityTooLarge, errorBody{Type: prefixService + code, Message: msg}
	}
	return http.StatusBadRequest, errorBody{Type: prefixService + code, Message: msg}
}
