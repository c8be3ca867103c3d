package api

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// The request log: one structured line per request. Middleware around the
// API handler (WithRequestLog); the handler contributes only what it alone
// knows (the authenticated account and the table) through a record in the
// request context (noteRequest).
//
// Levels: every request at debug; errors (HTTP 4xx except the expected
// outcomes ConditionalCheckFailedException and TransactionCanceledException)
// and slow requests at info; 5xx at warn. Request and response bodies are
// never logged: no item value, key value, expression value or header
// (Authorization, X-Amz-Security-Token) reaches the log at any level.

// RequestLogOptions configure WithRequestLog.
type RequestLogOptions struct {
	// Logger receives the lines (nil: no request log).
	Logger *slog.Logger
	// SlowThreshold: a request that takes at least this long is logged at
	// info with slow=true. Zero disables the slow-request lines.
	SlowThreshold time.Duration
}

// WithRequestLog wraps the API handler with the request log.
func WithRequestLog(next http.Handler, opt RequestLogOptions) http.Handler {
	if opt.Logger == nil {
		return next
	}
	return &requestLogger{next: next, log: opt.Logger, slow: opt.SlowThreshold}
}

type requestLogger struct {
	next http.Handler
	log  *slog.Logger
	slow time.Duration
}

// reqRecord is what the handler notes about a request for its log line.
type reqRecord struct {
	account string
	table   string
}

type reqRecordKey struct{}

// noteRequest records the authenticated account and the table a request
// names, when the request log is on. Only the table name is taken from the
// body.
func noteRequest(ctx context.Context, account string, body []byte) {
	rec, ok := ctx.Value(reqRecordKey{}).(*reqRecord)
	if !ok {
		return
	}
	rec.account = account
	rec.table = tableNameOf(body)
}

func (l *requestLogger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// One allocation for the request's record, body counter and writer.
	st := &struct {
		rec reqRecord
		cr  countingReader
		rw  recordingWriter
	}{}
	rec, cr, rw := &st.rec, &st.cr, &st.rw
	cr.r = r.Body
	r.Body = cr
	r = r.WithContext(context.WithValue(r.Context(), reqRecordKey{}, rec))
	rw.ResponseWriter, rw.status = w, http.StatusOK
	l.next.ServeHTTP(rw, r)
	d := time.Since(start)

	errType := ""
	if rw.status >= 400 {
		errType = errorTypeOf(rw.head.Bytes())
	}
	level := slog.LevelDebug
	switch {
	case rw.status >= 500:
		level = slog.LevelWarn
	case rw.status >= 400 && errType != "ConditionalCheckFailedException" && errType != "TransactionCanceledException":
		level = slog.LevelInfo
	case l.slow > 0 && d >= l.slow:
		level = slog.LevelInfo
	}
	ctx := r.Context()
	if !l.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 14)
	op := operationOf(r)
	if op != "" {
		attrs = append(attrs, slog.String("operation", op))
	} else {
		attrs = append(attrs, slog.String("method", r.Method), slog.String("path", clip(r.URL.Path, 64)))
	}
	if rec.table != "" {
		attrs = append(attrs, slog.String("table", rec.table))
	}
	attrs = append(attrs, slog.Int("status", rw.status))
	if errType != "" {
		attrs = append(attrs, slog.String("error", errType))
	}
	attrs = append(attrs,
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.Int64("bytes_in", cr.n),
		slog.Int64("bytes_out", rw.n),
	)
	if id := rw.Header().Get("x-amzn-RequestId"); id != "" {
		attrs = append(attrs, slog.String("request_id", id))
	}
	if rec.account != "" {
		attrs = append(attrs, slog.String("account", rec.account))
	}
	if l.slow > 0 && d >= l.slow {
		attrs = append(attrs, slog.Bool("slow", true))
	}
	attrs = append(attrs, slog.String("remote", r.RemoteAddr))
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, slog.String("user_agent", clip(ua, 120)))
	}
	l.log.LogAttrs(ctx, level, "request", attrs...)
}

// operationOf is the DynamoDB operation of an API request ("" for the
// other endpoints); an unknown target is logged clipped.
func operationOf(r *http.Request) string {
	t := r.Header.Get("X-Amz-Target")
	if t == "" {
		return ""
	}
	return clip(strings.TrimPrefix(t, targetPrefix), 64)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// tableNameOf finds the table a request body names: the first top-level
// style "TableName":"..." member, or the first key of RequestItems (batch
// operations). In DynamoDB JSON an attribute value is always an object, so
// a "TableName" key followed by a string is never item data. Large bodies
// are searched in their first and last 64 KiB (SDKs put TableName first or,
// in alphabetical order, after Item).
func tableNameOf(body []byte) string {
	const window = 64 << 10
	if len(body) > 2*window {
		if t := tableNameIn(body[:window]); t != "" {
			return t
		}
		return tableNameIn(body[len(body)-window:])
	}
	return tableNameIn(body)
}

var (
	tableNameKey    = []byte(`"TableName"`)
	requestItemsKey = []byte(`"RequestItems"`)
)

func tableNameIn(b []byte) string {
	for off := 0; off < len(b); {
		i := bytes.Index(b[off:], tableNameKey)
		if i < 0 {
			break
		}
		p := off + i + len(tableNameKey)
		if s, ok := stringAfterColon(b, p); ok {
			return s
		}
		off = p
	}
	if i := bytes.Index(b, requestItemsKey); i >= 0 {
		p := skipSpace(b, i+len(requestItemsKey))
		if p < len(b) && b[p] == ':' {
			p = skipSpace(b, p+1)
			if p < len(b) && b[p] == '{' {
				if s, ok := stringAt(b, skipSpace(b, p+1)); ok {
					return s
				}
			}
		}
	}
	return ""
}

func skipSpace(b []byte, p int) int {
	for p < len(b) && (b[p] == ' ' || b[p] == '\t' || b[p] == '\n' || b[p] == '\r') {
		p++
	}
	return p
}

func stringAfterColon(b []byte, p int) (string, bool) {
	p = skipSpace(b, p)
	if p >= len(b) || b[p] != ':' {
		return "", false
	}
	return stringAt(b, skipSpace(b, p+1))
}

// stringAt reads a JSON string of table-name characters (at most 1024
// bytes, no escapes) at p. Anything else is not taken: a name that is
// invalid anyway is not worth logging.
func stringAt(b []byte, p int) (string, bool) {
	if p >= len(b) || b[p] != '"' {
		return "", false
	}
	for q := p + 1; q < len(b) && q-p <= 1025; q++ {
		c := b[q]
		switch {
		case c == '"':
			return string(b[p+1 : q]), q > p+1
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.', c == ':', c == '/':
		default:
			return "", false
		}
	}
	return "", false
}

// errorTypeOf is the error name of a DynamoDB error body's __type
// ("ValidationException"); only the name is taken, never the message.
func errorTypeOf(head []byte) string {
	i := bytes.Index(head, []byte(`"__type":"`))
	if i < 0 {
		return ""
	}
	s := head[i+len(`"__type":"`):]
	j := bytes.IndexByte(s, '"')
	if j < 0 {
		return ""
	}
	s = s[:j]
	if k := bytes.LastIndexByte(s, '#'); k >= 0 {
		s = s[k+1:]
	}
	return clip(string(s), 64)
}

type countingReader struct {
	r io.ReadCloser
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

// recordingWriter records the status, the bytes written and, for error
// responses, the head of the body (where __type is).
type recordingWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	n           int64
	head        bytes.Buffer
}

func (w *recordingWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.status >= 400 && w.head.Len() < 256 {
		w.head.Write(p[:min(len(p), 256-w.head.Len())])
	}
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

// Flush passes through (promhttp and streaming responses).
func (w *recordingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
