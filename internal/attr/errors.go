package attr

// ErrorKind tells which DynamoDB error a codec failure becomes.
type ErrorKind uint8

const (
	// KindValidation becomes a ValidationException.
	KindValidation ErrorKind = iota + 1
	// KindSerialization becomes a SerializationException.
	KindSerialization
)

// Error is a client error found while decoding or validating values.
type Error struct {
	Kind    ErrorKind
	Message string
}

func (e *Error) Error() string { return e.Message }

// Validation returns a KindValidation error.
func Validation(msg string) *Error { return &Error{Kind: KindValidation, Message: msg} }

// Serialization returns a KindSerialization error.
func Serialization(msg string) *Error { return &Error{Kind: KindSerialization, Message: msg} }
