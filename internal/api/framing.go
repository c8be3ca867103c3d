package api

import (
	"bytes"
	"encoding/json"
	"hash/crc32"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// WrapListener makes the HTTP layer's own answers speak the protocol.
//
// net/http answers a request it cannot parse (a bad Content-Length, a NUL
// or CR in a header, an unsupported Transfer-Encoding, headers over the
// limit) itself, before any handler runs, with a plain-text body written
// straight to the connection in one write. The connections of the wrapped
// listener recognise exactly those answers and replace them with a
// DynamoDB error (JSON with __type and message, x-amzn-RequestId,
// x-amz-crc32): 400 SerializationException, or 413
// RequestEntityTooLargeException for headers over the limit. Everything
// else passes through unchanged.
//
// The connection is closed after such an answer, as net/http does. Requests whose
// headers never finish (the header timeout) are closed without an answer:
// there is no request to answer. Over TLS the writes are encrypted before
// they reach the listener's connections, so HTTPS keeps net/http's
// plain-text answers for these cases.
func WrapListener(ln net.Listener) net.Listener { return framingListener{ln} }

type framingListener struct{ net.Listener }

func (l framingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &framingConn{Conn: c}, nil
}

type framingConn struct{ net.Conn }

// net/http's connection-level error answers: "HTTP/1.1 <status>" +
// plainErrorHeaders + text, in a single write.
const plainErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c *framingConn) Write(p []byte) (int, error) {
	if out, ok := rewriteHTTPError(p); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// rewriteHTTPError turns one of net/http's plain-text error answers into
// a DynamoDB error response.
func rewriteHTTPError(p []byte) ([]byte, bool) {
	// Successful answers (every response the API writes on the hot path)
	// never need a look: net/http's own answers are 4xx and 5xx.
	if !bytes.HasPrefix(p, []byte("HTTP/1.1 ")) || bytes.HasPrefix(p, []byte("HTTP/1.1 2")) {
		return nil, false
	}
	if bytes.HasPrefix(p, []byte(expectationFailed)) && !bytes.Contains(p, []byte("\r\nX-Amzn-Requestid:")) {
		// An Expect header other than 100-continue: net/http answers 417
		// with an empty body before the handler runs.
		return dynamoError(http.StatusExpectationFailed, errorBody{Type: prefixService + "SerializationException",
			Message: "Malformed HTTP request: unsupported Expect header"})
	}
	i := bytes.Index(p, []byte(plainErrorHeaders))
	if i < 0 || bytes.Contains(p[:i], []byte("\r\n")) {
		return nil, false
	}
	status := string(p[len("HTTP/1.1 "):i])
	text := string(p[i+len(plainErrorHeaders):])
	code, _, _ := strings.Cut(status, " ")
	st, body := http.StatusBadRequest, errorBody{Type: prefixService + "SerializationException"}
	switch code {
	case "431":
		st, body = http.StatusRequestEntityTooLarge, errorBody{Type: prefixService + codeTooLarge,
			Message: "Request header fields exceed the limit of 1 MB"}
	default:
		// "400 Bad Request", "400 Bad Request: missing required Host
		// header", "Unsupported transfer encoding" (net/http's 501),
		// "505 HTTP Version Not Supported: ...".
		text = strings.TrimPrefix(text, "400 ")
		body.Message = "Malformed HTTP request: " + text
	}
	return dynamoError(st, body)
}

const expectationFailed = "HTTP/1.1 417 Expectation Failed\r\n"

// dynamoError renders a whole error response that closes the connection.
func dynamoError(st int, body errorBody) ([]byte, bool) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, false
	}
	var out bytes.Buffer
	out.WriteString("HTTP/1.1 " + strconv.Itoa(st) + " " + http.StatusText(st) + "\r\n")
	out.WriteString("Content-Type: application/x-amz-json-1.0\r\n")
	out.WriteString("X-Amzn-Requestid: " + newRequestID() + "\r\n")
	out.WriteString("X-Amz-Crc32: " + strconv.FormatUint(uint64(crc32.ChecksumIEEE(b)), 10) + "\r\n")
	out.WriteString("Content-Length: " + strconv.Itoa(len(b)) + "\r\n")
	out.WriteString("Date: " + time.Now().UTC().Format(http.TimeFormat) + "\r\n")
	out.WriteString("Connection: close\r\n\r\n")
	out.Write(b)
	return out.Bytes(), true
}
