// Package api is the HTTP front end: the DynamoDB JSON wire protocol
// (routing by X-Amz-Target, request decoding, response encoding with
// x-amz-crc32, the error table), health, readiness and metrics.
package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/crc32"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/engine"
)

// MaxBodyBytes is the largest request body accepted (16 MB).
const MaxBodyBytes = 16 * 1024 * 1024

const targetPrefix = "DynamoDB_20120810."

// streamsTargetPrefix is the target prefix of the DynamoDB Streams API,
// served on the same endpoint.
const streamsTargetPrefix = "DynamoDBStreams_20120810."

// DefaultAccount is the account of requests when no credentials map to
// another one.
const DefaultAccount = "000000000000"

// Options configure the handler.
type Options struct {
	Logger   *slog.Logger
	Registry prometheus.Registerer
	Gatherer prometheus.Gatherer
	// Ready reports readiness (backend and backup store reachable).
	Ready func(ctx context.Context) error
	// Auth verifies request signatures; nil accepts every request as
	// DefaultAccount.
	Auth *Authenticator
	// Limits bound the memory and time each request may hold (see
	// limits.go); zero fields take the defaults.
	Limits Limits
}

type handlerFunc func(ctx context.Context, account string, body []byte) (any, error)

// Server serves the DynamoDB API over an engine.
type Server struct {
	eng     *engine.Engine
	log     *slog.Logger
	ops     map[string]handlerFunc
	streams map[string]handlerFunc // the DynamoDB Streams API
	ready   func(ctx context.Context) error
	auth    *Authenticator
	router  *mux.Router
	metrics *metrics
	bufs    sync.Pool // *bytes.Buffer for request bodies and encoding
	outBufs sync.Pool // *[]byte for responses that append their JSON
	limits  Limits
	budget  *budget
}

// decode decodes a request body; an empty body is an empty object. The
// body's text is checked first: encoding/json would replace invalid UTF-8
// and lone surrogate escapes with U+FFFD in every string (table names,
// attribute names, keys, ...), so that different inputs would alias.
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := attr.CheckText(body); err != nil {
		return err
	}
	if fastDecode(body, v) {
		return nil
	}
	resetInput(v)
	return json.Unmarshal(body, v)
}

func op[In any, Out any](fn func(context.Context, string, *In) (Out, error)) handlerFunc {
	return func(ctx context.Context, account string, body []byte) (any, error) {
		var in In
		if err := decode(body, &in); err != nil {
			return nil, err
		}
		if err := reserveDecoded(ctx, &in); err != nil {
			return nil, err
		}
		return fn(ctx, account, &in)
	}
}

// New builds the server's handler.
func New(eng *engine.Engine, opt Options) *Server {
	s := &Server{eng: eng, log: opt.Logger, ready: opt.Ready, auth: opt.Auth, limits: opt.Limits.withDefaults()}
	s.budget = newBudget(s.limits.MaxInflightBodyBytes)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.bufs.New = func() any { return new(bytes.Buffer) }
	s.outBufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	s.ops = map[string]handlerFunc{
		"CreateTable":        op(eng.CreateTable),
		"DescribeTable":      op(eng.DescribeTable),
		"DeleteTable":        op(eng.DeleteTable),
		"ListTables":         op(eng.ListTables),
		"PutItem":            op(eng.PutItem),
		"GetItem":            op(eng.GetItem),
		"UpdateItem":         op(eng.UpdateItem),
		"DeleteItem":         op(eng.DeleteItem),
		"Query":              op(eng.Query),
		"Scan":               op(eng.Scan),
		"BatchGetItem":       op(eng.BatchGetItem),
		"BatchWriteItem":     op(eng.BatchWriteItem),
		"TransactWriteItems": op(eng.TransactWriteItems),
		"TransactGetItems":   op(eng.TransactGetItems),

		// PartiQL, lowered onto the operations above.
		"ExecuteStatement":      op(eng.ExecuteStatement),
		"BatchExecuteStatement": op(eng.BatchExecuteStatement),
		"ExecuteTransaction":    op(eng.ExecuteTransaction),
		"UpdateTable":           op(eng.UpdateTable),
		"UpdateTimeToLive":      op(eng.UpdateTimeToLive),
		"DescribeTimeToLive":    op(eng.DescribeTimeToLive),
		"TagResource":           op(eng.TagResource),
		"UntagResource":         op(eng.UntagResource),
		"ListTagsOfResource":    op(eng.ListTagsOfResource),
		"DescribeLimits":        op(eng.DescribeLimits),
		"DescribeEndpoints":     describeEndpoints,

		// On-demand backups (docs/adr/0015-backup-operations.md).
		"CreateBackup":              op(eng.CreateBackup),
		"DescribeBackup":            op(eng.DescribeBackup),
		"ListBackups":               op(eng.ListBackups),
		"DeleteBackup":              op(eng.DeleteBackup),
		"RestoreTableFromBackup":    op(eng.RestoreTableFromBackup),
		"RestoreTableToPointInTime": op(eng.RestoreTableToPointInTime),
		"DescribeContinuousBackups": op(eng.DescribeContinuousBackups),
		"UpdateContinuousBackups":   op(eng.UpdateContinuousBackups),

		// Exports to S3 in AWS's format (docs/adr/0049-aws-format-exports.md).
		"ExportTableToPointInTime": op(eng.ExportTableToPointInTime),
		"DescribeExport":           op(eng.DescribeExport),
		"ListExports":              op(eng.ListExports),
		"ImportTable":              op(eng.ImportTable),
		"DescribeImport":           op(eng.DescribeImport),
		"ListImports":              op(eng.ListImports),
	}
	s.streams = map[string]handlerFunc{
		"ListStreams":      op(eng.ListStreams),
		"DescribeStream":   op(eng.DescribeStream),
		"GetShardIterator": op(eng.GetShardIterator),
		"GetRecords":       op(eng.GetRecords),
	}
	s.metrics = newMetrics(opt.Registry)
	r := mux.NewRouter()
	// A DynamoDB client may send any path ("//" included): no redirects.
	r.SkipClean(true)
	r.HandleFunc("/health", s.health).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/ready", s.readyHandler).Methods(http.MethodGet, http.MethodHead)
	if opt.Gatherer != nil {
		r.Handle("/metrics", promhttp.HandlerFor(opt.Gatherer, promhttp.HandlerOpts{})).Methods(http.MethodGet)
	}
	r.PathPrefix("/").HandlerFunc(s.serveAPI)
	s.router = r
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

func newRequestID() string {
	var b [18]byte
	_, _ = rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	s.writeRaw(w, newRequestID(), http.StatusOK, []byte(`{"status":"ok"}`))
}

// NotReady is a readiness failure whose Reason may be shown on /ready,
// which answers without authentication: a reason written for operators
// (e.g. the backup store belongs to another catalog, and the command that
// takes it back), never a driver's error that could name hosts or users.
// Other readiness errors are logged and answered without a reason.
type NotReady struct {
	Reason string
	Err    error
}

func (e *NotReady) Error() string { return e.Reason }
func (e *NotReady) Unwrap() error { return e.Err }

func (s *Server) readyHandler(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	id := newRequestID()
	if s.ready != nil {
		if err := s.ready(ctx); err != nil {
			s.log.Warn("not ready", "err", err, "request_id", id)
			body := []byte(`{"status":"unavailable"}`)
			var nr *NotReady
			if errors.As(err, &nr) {
				body, _ = json.Marshal(map[string]string{"status": "unavailable", "reason": nr.Reason})
			}
			s.writeRaw(w, id, http.StatusServiceUnavailable, body)
			return
		}
	}
	s.writeRaw(w, id, http.StatusOK, []byte(`{"status":"ready"}`))
}

// writeRaw writes a JSON body with the headers every response carries.
// amzJSONContentType is shared by every response (never modified).
var amzJSONContentType = []string{"application/x-amz-json-1.0"}

func (s *Server) writeRaw(w http.ResponseWriter, requestID string, status int, body []byte) {
	// The keys are written in canonical form directly: Header.Set would
	// canonicalize each of them on every response (net/http writes them
	// canonical either way: X-Amzn-Requestid, X-Amz-Crc32).
	h := w.Header()
	h["Content-Type"] = amzJSONContentType
	h["X-Amzn-Requestid"] = []string{requestID}
	h["X-Amz-Crc32"] = []string{strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10)}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	s.armWrite(w)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (s *Server) writeError(w http.ResponseWriter, requestID string, status int, body errorBody) {
	b, err := json.Marshal(body)
	if err != nil {
		b = []byte(`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}`)
		status = http.StatusInternalServerError
	}
	s.writeRaw(w, requestID, status, b)
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := newRequestID()
	target := r.Header.Get("X-Amz-Target")
	opName, handler, known := s.route(target)
	if r.Method != http.MethodPost || !known {
		if r.Method == http.MethodGet && r.URL.Path == "/" && target == "" {
			// DynamoDB answers a plain GET on / with a short health text.
			s.writeRaw(w, id, http.StatusOK, []byte(`{"status":"healthy"}`))
			return
		}
		st, body := protocolError(codeUnknownOperation, unknownOperationMessage(r.Method, target))
		s.metrics.observe("unknown", codeUnknownOperation, start)
		s.abandonBody(w, r)
		s.writeError(w, id, st, body)
		return
	}
	// Everything the headers can prove is checked before the body is
	// read, so an unsigned client cannot make the server hold its body.
	sc, aerr := s.auth.CheckHeaders(r)
	if aerr != nil {
		ae := aerr.(*authError)
		s.metrics.observe(opName, ae.code, start)
		s.abandonBody(w, r)
		s.writeError(w, id, http.StatusBadRequest, errorBody{Type: prefixService + ae.code, Message: ae.msg})
		return
	}
	res := &reservation{b: s.budget}
	defer res.done()
	reply, ok := replyReserve[opName]
	if !ok {
		reply = defaultReplyReserve
	}
	stopRead := s.armBodyRead(w)
	body, releaseBody, err := s.readBody(r, res, reply)
	stopRead(err == nil)
	defer func() { releaseBody() }() // the variable: it is replaced once the body is decoded
	if err != nil {
		s.abandonBody(w, r)
		s.bodyReadError(w, id, opName, err, start)
		return
	}
	account, aerr := sc.VerifyBody(r, body)
	if aerr != nil {
		ae := aerr.(*authError)
		s.metrics.observe(opName, ae.code, start)
		s.writeError(w, id, http.StatusBadRequest, errorBody{Type: prefixService + ae.code, Message: ae.msg})
		return
	}
	noteRequest(r.Context(), account, body) // request log (requestlog.go)
	ctx := context.WithValue(r.Context(), hostKey{}, r.Host)
	ctx = context.WithValue(ctx, budgetKey{}, &decodedBudget{res: res, wait: s.limits.InflightWait})
	out, err := s.call(ctx, handler, account, body)
	// The body is decoded: its buffer and reservation are no longer needed.
	releaseBody()
	releaseBody = func() {}
	body = nil
	res.set(reply)
	if errors.Is(err, errThrottled) {
		s.bodyReadError(w, id, opName, err, start)
		return
	}
	if err != nil {
		st, body, internal := mapError(err)
		if internal {
			s.log.Error("internal error", "request_id", id, "operation", opName, "err", err)
		} else if st == http.StatusServiceUnavailable {
			s.log.Warn("storage unavailable", "request_id", id, "operation", opName, "err", err)
		}
		s.metrics.observe(opName, body.Type[strings.IndexByte(body.Type, '#')+1:], start)
		s.writeError(w, id, st, body)
		return
	}
	enc := s.bufs.Get().(*bytes.Buffer)
	enc.Reset()
	defer s.putBuf(enc)
	var b []byte
	if lb, ok, lerr := appendReply(nil, out); ok {
		b, err = lb, lerr
	} else if a, ok := out.(engine.Appender); ok {
		bp := s.outBufs.Get().(*[]byte)
		defer func() {
			if cap(b) <= poolableBytes {
				*bp = b[:0]
			}
			s.outBufs.Put(bp)
		}()
		b, err = a.AppendJSON((*bp)[:0])
	} else {
		je := json.NewEncoder(enc)
		je.SetEscapeHTML(false)
		err = je.Encode(out)
		b = bytes.TrimSuffix(enc.Bytes(), []byte("\n"))
	}
	if err != nil {
		s.log.Error("encoding response", "request_id", id, "operation", opName, "err", err)
		st, body, _ := mapError(err)
		s.writeError(w, id, st, body)
		return
	}
	// Only the encoded response is held while the client takes it.
	out = nil
	res.set(int64(len(b)))
	s.metrics.observe(opName, "", start)
	s.writeRaw(w, id, http.StatusOK, b)
}

// route finds the handler of an X-Amz-Target: a DynamoDB or a DynamoDB
// Streams operation.
func (s *Server) route(target string) (string, handlerFunc, bool) {
	if op, ok := strings.CutPrefix(target, targetPrefix); ok {
		h, known := s.ops[op]
		return op, h, known
	}
	if op, ok := strings.CutPrefix(target, streamsTargetPrefix); ok {
		h, known := s.streams[op]
		return op, h, known
	}
	return target, nil, false
}

// call runs a handler, turning a panic into an internal error so that no
// input can crash the server.
func (s *Server) call(ctx context.Context, h handlerFunc, account string, body []byte) (out any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errors.New("panic: " + toString(p))
		}
	}()
	return h(ctx, account, body)
}

func toString(p any) string {
	switch x := p.(type) {
	case error:
		return x.Error()
	case string:
		return x
	}
	b, _ := json.Marshal(p)
	return string(b)
}

type hostKey struct{}

type endpoint struct {
	Address              string `json:"Address"`
	CachePeriodInMinutes int64  `json:"CachePeriodInMinutes"`
}

// describeEndpoints answers with the address the client reached.
func describeEndpoints(ctx context.Context, account string, body []byte) (any, error) {
	host, _ := ctx.Value(hostKey{}).(string)
	return struct {
		Endpoints []endpoint `json:"Endpoints"`
	}{[]endpoint{{Address: host, CachePeriodInMinutes: 1440}}}, nil
}
