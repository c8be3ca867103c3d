package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func corsDo(h http.Handler, method, origin string, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "/", strings.NewReader(`{}`))
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

var preflight = map[string]string{
	"Access-Control-Request-Method":  "POST",
	"Access-Control-Request-Headers": "content-type,x-amz-target,x-amz-date,authorization,amz-sdk-invocation-id,amz-sdk-request,x-amz-user-agent",
}

var listTables = map[string]string{"X-Amz-Target": "DynamoDB_20120810.ListTables", "Content-Type": "application/x-amz-json-1.0"}

// TestCORSAllOrigins: the loopback development default answers every
// origin's preflight and exposes DynamoDB's response headers.
func TestCORSAllOrigins(t *testing.T) {
	h := WithCORS(newServer(t), []string{"*"})
	w := corsDo(h, http.MethodOptions, "http://localhost:3000", preflight)
	if w.Code != http.StatusNoContent {
		t.Fatalf("preflight: %d %s", w.Code, w.Body.String())
	}
	for k, want := range map[string]string{
		"Access-Control-Allow-Origin":  "*",
		"Access-Control-Allow-Methods": "GET, POST, OPTIONS",
		"Access-Control-Allow-Headers": preflight["Access-Control-Request-Headers"],
		"Access-Control-Max-Age":       "7200",
	} {
		if got := w.Header().Get(k); got != want {
			t.Errorf("preflight %s = %q, want %q", k, got, want)
		}
	}
	w = corsDo(h, http.MethodPost, "http://localhost:3000", listTables)
	if w.Code != 200 || w.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("POST: %d %v", w.Code, w.Header())
	}
	exp := w.Header().Get("Access-Control-Expose-Headers")
	for _, h := range []string{"x-amzn-RequestId", "x-amz-crc32"} {
		if !strings.Contains(exp, h) {
			t.Errorf("Access-Control-Expose-Headers %q lacks %s", exp, h)
		}
	}
	// No Origin: not a CORS request, no CORS headers.
	w = corsDo(h, http.MethodPost, "", listTables)
	if w.Code != 200 || w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("no origin: %d %v", w.Code, w.Header())
	}
	// A preflight whose header list is not a header list gets the default list.
	w = corsDo(h, http.MethodOptions, "http://x", map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "a\r\nb: c"})
	if got := w.Header().Get("Access-Control-Allow-Headers"); got != corsDefaultHeaders {
		t.Errorf("odd request headers echoed: %q", got)
	}
}

// TestCORSListedOrigins: only listed origins get CORS headers; others get
// none (their preflight reaches the API and fails like before).
func TestCORSListedOrigins(t *testing.T) {
	h := WithCORS(newServer(t), []string{"https://app.example.com"})
	w := corsDo(h, http.MethodOptions, "https://APP.example.com", preflight)
	if w.Code != http.StatusNoContent || w.Header().Get("Access-Control-Allow-Origin") != "https://APP.example.com" ||
		!strings.Contains(strings.Join(w.Header().Values("Vary"), ","), "Origin") {
		t.Fatalf("allowed preflight: %d %v", w.Code, w.Header())
	}
	for _, m := range []string{http.MethodOptions, http.MethodPost} {
		w = corsDo(h, m, "https://evil.example.com", map[string]string{"Access-Control-Request-Method": "POST", "X-Amz-Target": "DynamoDB_20120810.ListTables"})
		for k := range w.Header() {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("%s from a foreign origin got %s", m, k)
			}
		}
	}
	if w := corsDo(h, http.MethodOptions, "https://evil.example.com", preflight); w.Code == http.StatusNoContent {
		t.Errorf("foreign preflight answered 204")
	}
}

// TestCORSDisabled: with no origins the handler is unchanged.
func TestCORSDisabled(t *testing.T) {
	s := newServer(t)
	if WithCORS(s, nil) != http.Handler(s) {
		t.Fatal("WithCORS(nil) wraps the handler")
	}
	w := corsDo(WithCORS(s, nil), http.MethodOptions, "http://localhost:3000", preflight)
	if w.Code == http.StatusNoContent || w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("disabled: %d %v", w.Code, w.Header())
	}
}
