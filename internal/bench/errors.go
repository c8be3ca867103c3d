package bench

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// Client-side check failures are reported under these codes.
const (
	codeItemNotFound = "client:ItemNotFound" // GetItem returned no item
	codeShortQuery   = "client:ShortQuery"   // Query returned fewer items than Limit
)

// ErrorCode classifies an error from one request: the DynamoDB error code
// (smithy APIError.ErrorCode) when the server answered with one, else an
// HTTP status class, else a network class ("net:...").
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() != "" {
		return ae.ErrorCode()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() != 0 {
		return "http:" + strconv.Itoa(re.HTTPStatusCode())
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "net:timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "net:connection-refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "net:connection-reset"
	case errors.Is(err, syscall.EPIPE):
		return "net:broken-pipe"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "net:addr-not-available"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "net:eof"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "net:timeout"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return "net:" + oe.Op
	}
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "checksum") || strings.Contains(msg, "crc32"):
		return "client:checksum"
	case strings.Contains(msg, "deserializ"):
		return "client:deserialization"
	}
	return "client:other"
}

// isNetworkCode reports whether a code names a failure without a server
// answer; the hot loop pauses briefly after one so a dead server is not
// spun against.
func isNetworkCode(code string) bool { return strings.HasPrefix(code, "net:") }
