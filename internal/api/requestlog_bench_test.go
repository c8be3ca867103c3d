package api

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkRequestLogOverhead: the middleware's cost per request at info
// (the line is not written) around a trivial handler.
func BenchmarkRequestLogOverhead(b *testing.B) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		noteRequest(r.Context(), DefaultAccount, body)
		w.Header().Set("x-amzn-RequestId", "X")
		w.WriteHeader(200)
		_, _ = w.Write([]byte(`{}`))
	})
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"bare", inner}, {"logged", WithRequestLog(inner, RequestLogOptions{Logger: log})}} {
		b.Run(c.name, func(b *testing.B) {
			body := `{"TableName":"bench","Key":{"pk":{"S":"k1"}}}`
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
				r.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
				c.h.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
}
