package engine

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
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

	// CodePITRUnavailable: the source of a point-in-time restore has no
	// point-in-time recovery (off, or nothing shipped yet).
	CodePITRUnavailable Code = "PointInTimeRecoveryUnavailableException"
	// CodeInvalidRestoreTime: the restore instant is outside the window.
	CodeInvalidRestoreTime Code = "InvalidRestoreTimeException"
	// CodeInvalidExportTime: the export instant is outside the window.
	CodeInvalidExportTime Code = "InvalidExportTimeException"
	// CodeExportConflict: a ClientToken replayed with other parameters.
	CodeExportConflict Code = "ExportConflictException"
	// CodeExportNotFound: DescribeExport of an unknown export.
	CodeExportNotFound Code = "ExportNotFoundException"

	// Imports.
	CodeImportConflict Code = "ImportConflictException"
	CodeImportNotFound Code = "ImportNotFoundException"
)

// Codes lists every engine code (for tests that walk the error table).
var Codes = []Code{CodeValidation, CodeSerialization, CodeResourceNotFound, CodeResourceInUse,
	CodeConditionalCheckFailed, CodeTransactionCanceled, CodeTransactionConflict, CodeTransactionInProgress,
	CodeIdempotentMismatch, CodeLimitExceeded, CodeThroughputExceeded, CodeRequestLimitExceeded,
	CodeItemCollectionTooLarge, CodeTableNotFound, CodeTableAlreadyExists, CodeTableInUse,
	CodeBackupNotFound, CodeBackupInUse, CodeServiceUnavailable, CodeInternal,
	CodeContinuousBackupsUnavailable, CodePITRUnavailable, CodeInvalidRestoreTime, CodeExpiredIterator, CodeTrimmedDataAccess, CodeDuplicateItem,
	CodeInvalidExportTime, CodeExportConflict, CodeExportNotFound, CodeImportConflict, CodeImportNotFound}

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
	// Cause is the error behind an internal or unavailable one: logged
	// under the request id, never sent to the client.
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return string(e.Code) + ": " + e.Message + ": " + e.Cause.Error()
	}
	return string(e.Code) + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// storageKindCodes maps the storage kinds that leave the engine unchanged
// (the engine translates the context-dependent ones where they happen).
var storageKindCodes = map[backend.Kind]Code{
	backend.KindInternal:            CodeInternal,
	backend.KindTableNotFound:       CodeResourceNotFound,
	backend.KindTableExists:         CodeResourceInUse,
	backend.KindTransactionCanceled: CodeTransactionCanceled,
	backend.KindTransactionConflict: CodeTransactionConflict,
	backend.KindLimitExceeded:       CodeLimitExceeded,
	backend.KindUnavailable:         CodeServiceUnavailable,
	backend.KindSnapshotExpired:     CodeInternal,
	backend.KindUnsupported:         CodeValidation,
	backend.KindSchema:              CodeServiceUnavailable,
	// The engine recomputes a write refused as computed from a stale table
	// description; one still refused after its attempts is retryable.
	backend.KindTableVersion: CodeServiceUnavailable,
}

// FromStorage translates a storage error into the engine's error, with
// the message a client may see (the cause is kept for the log); any other
// error is returned unchanged. The api applies it to every error it
// answers, so storage kinds are mapped here, once.
func FromStorage(err error) error {
	var se *backend.Error
	if !errors.As(err, &se) {
		return err
	}
	code, ok := storageKindCodes[se.Kind]
	if !ok {
		code = CodeInternal
	}
	msg := se.Message
	switch se.Kind {
	case backend.KindUnavailable:
		// The backend's own words (which operation, pool bounds); the
		// driver's cause goes to the server log only.
		what := "unavailable"
		var ne net.Error
		if errors.As(se.Cause, &ne) {
			what = "unreachable" // the connection failed: down, refused, timed out
		}
		msg = "Storage backend " + what + ": " + se.Message + " (retryable; the server log has the cause under this request id)"
	case backend.KindSchema:
		msg = "Storage schema not ready: " + se.Message
	case backend.KindTableVersion:
		// Every retry met a description changed again by another server.
		msg = "The table's description kept changing while the write was computed; retry"
	}
	if code == CodeInternal {
		msg = "Internal server error"
	}
	return &Error{Code: code, Message: msg, Cause: err}
}

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

// Stream errors of the Streams API.
const (
	CodeExpiredIterator   Code = "ExpiredIteratorException"
	CodeTrimmedDataAccess Code = "TrimmedDataAccessException"
)

// CodeDuplicateItem is INSERT's answer when the key exists.
const CodeDuplicateItem Code = "DuplicateItemException"

// backupErr translates the jobs' storage errors.
func backupErr(err error, table string) error {
	k, ok := backend.KindOf(err)
	if !ok {
		return err
	}
	msg := err.Error()
	if se, ok := err.(*backend.Error); ok {
		msg = se.Message
		if se.Cause != nil {
			msg += ": " + se.Cause.Error()
		}
	}
	switch k {
	case backend.KindTableNotFound:
		return newErr(CodeTableNotFound, "Table not found: %s", table)
	case backend.KindLimitExceeded:
		return newErr(CodeLimitExceeded, "%s", msg)
	case backend.KindUnavailable:
		return newErr(CodeServiceUnavailable, "%s", msg)
	case backend.KindUnsupported:
		return validationf("%s", msg)
	}
	return err
}
