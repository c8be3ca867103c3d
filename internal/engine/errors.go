package engine

import (
	"fmt"
	"strings"

	"github.com/extenddb/extenddb/internal/attr"
)

// Code is a DynamoDB error name. The api package maps each code to its
// wire __type prefix and HTTP status, once.
type Code string

const (
	CodeValidation             Code = "ValidationException"
	CodeSerialization          Code = "SerializationException"
	CodeResourceNotFound       Code = "ResourceNotFoundException"
	CodeResourceInUse          Code = "ResourceInUseException"
	CodeConditionalCheckFailed Code = "ConditionalCheckFailedException"
	CodeTransactionCanceled    Code = "TransactionCanceledException"
	CodeTransactionConflict    Code = "TransactionConflictException"
	CodeTransactionInProgress  Code = "TransactionInProgressException"
	CodeIdempotentMismatch     Code = "IdempotentParameterMismatchException"
	CodeLimitExceeded          Code = "LimitExceededException"
	CodeThroughputExceeded     Code = "ProvisionedThroughputExceededException"
	CodeRequestLimitExceeded   Code = "RequestLimitExceeded"
	CodeItemCollectionTooLarge Code = "ItemCollectionSizeLimitExceededException"
	CodeTableNotFound          Code = "TableNotFoundException"
	CodeTableAlreadyExists     Code = "TableAlreadyExistsException"
	CodeTableInUse             Code = "TableInUseException"
	CodeBackupNotFound         Code = "BackupNotFoundException"
	CodeBackupInUse            Code = "BackupInUseException"
	CodeServiceUnavailable     Code = "ServiceUnavailable"
	CodeInternal               Code = "InternalServerError"

	// CodeContinuousBackupsUnavailable: point-in-time recovery cannot be
	// enabled (extenddb has none).
	CodeContinuousBackupsUnavailable Code = "ContinuousBackupsUnavailableException"
)

// Codes lists every engine code (for tests that walk the error table).
var Codes = []Code{CodeValidation, CodeSerialization, CodeResourceNotFound, CodeResourceInUse,
	CodeConditionalCheckFailed, CodeTransactionCanceled, CodeTransactionConflict, CodeTransactionInProgress,
	CodeIdempotentMismatch, CodeLimitExceeded, CodeThroughputExceeded, CodeRequestLimitExceeded,
	CodeItemCollectionTooLarge, CodeTableNotFound, CodeTableAlreadyExists, CodeTableInUse,
	CodeBackupNotFound, CodeBackupInUse, CodeServiceUnavailable, CodeInternal,
	CodeContinuousBackupsUnavailable}

// CancellationReason is one entry of TransactionCanceledException.
type CancellationReason struct {
	Code    string    `json:"Code"`
	Message string    `json:"Message,omitempty"`
	Item    attr.Item `json:"Item,omitempty"`
}

// Error is a client-visible DynamoDB error.
type Error struct {
	Code    Code
	Message string
	// Item is the old item of a ConditionalCheckFailedException when
	// ReturnValuesOnConditionCheckFailure is ALL_OLD.
	Item attr.Item
	// Reasons are the CancellationReasons of TransactionCanceledException.
	Reasons []CancellationReason
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

func newErr(code Code, format string, args ...any) *Error {
	if len(args) == 0 {
		return &Error{Code: code, Message: format}
	}
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func validationf(format string, args ...any) *Error {
	return newErr(CodeValidation, format, args...)
}

// invalidParam is the common "One or more parameter values were invalid"
// ValidationException.
func invalidParam(format string, args ...any) *Error {
	return newErr(CodeValidation, "One or more parameter values were invalid: "+format, args...)
}

// constraintErrors accumulates the service's "N validation errors
// detected" messages for request members that fail their constraints.
type constraintErrors []string

func (c *constraintErrors) add(value any, member, constraint string) {
	var v string
	switch x := value.(type) {
	case nil:
		v = "null"
	case string:
		v = "'" + x + "'"
	default:
		v = fmt.Sprintf("'%v'", x)
	}
	*c = append(*c, fmt.Sprintf("Value %s at '%s' failed to satisfy constraint: %s", v, member, constraint))
}

func (c constraintErrors) err() error {
	if len(c) == 0 {
		return nil
	}
	noun := "error"
	if len(c) > 1 {
		noun = "errors"
	}
	return validationf("%d validation %s detected: %s", len(c), noun, strings.Join(c, "; "))
}
