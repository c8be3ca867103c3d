package api

import (
	"net/http"
	"strings"
)

// CORS for browser applications (the JavaScript SDK in a web page, web
// UIs such as dynamodb-admin): middleware around the API handler
// (WithCORS). A preflight (OPTIONS with Origin and
// Access-Control-Request-Method) from an allowed origin is answered here
// with 204; every response to an allowed origin carries
// Access-Control-Allow-Origin and exposes the headers the SDKs read. A
// request from an origin that is not allowed gets no CORS headers (an
// OPTIONS then reaches the API and is answered like any unknown request),
// so the browser refuses it.

// corsExposed are the response headers a browser script may read: the
// request id, the body checksum the SDKs verify, the error type.
const corsExposed = "x-amzn-RequestId, x-amz-crc32, x-amzn-ErrorType, x-amz-id-2, Date"

// corsDefaultHeaders are allowed when a preflight names none.
const corsDefaultHeaders = "authorization, content-type, x-amz-target, x-amz-date, x-amz-security-token, x-amz-user-agent, x-amz-content-sha256, amz-sdk-invocation-id, amz-sdk-request"

// WithCORS wraps the API handler. allowed lists origins
// ("https://app.example.com", compared without regard to case) or "*"
// (every origin); an empty list disables CORS.
func WithCORS(next http.Handler, allowed []string) http.Handler {
	if len(allowed) == 0 {
		return next
	}
	c := &cors{next: next, origins: map[string]bool{}}
	for _, o := range allowed {
		if o == "*" {
			c.any = true
		}
		c.origins[strings.ToLower(strings.TrimRight(o, "/"))] = true
	}
	return c
}

type cors struct {
	next    http.Handler
	any     bool
	origins map[string]bool
}

func (c *cors) allowed(origin string) bool {
	return origin != "" && (c.any || c.origins[strings.ToLower(origin)])
}

func (c *cors) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if !c.allowed(origin) {
		c.next.ServeHTTP(w, r)
		return
	}
	h := w.Header()
	if c.any {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
	}
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		reqHeaders := r.Header.Get("Access-Control-Request-Headers")
		if reqHeaders != "" && validHeaderList(reqHeaders) {
			h.Set("Access-Control-Allow-Headers", reqHeaders)
		} else {
			h.Set("Access-Control-Allow-Headers", corsDefaultHeaders)
		}
		if !c.any {
			h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
		}
		h.Set("Access-Control-Max-Age", "7200")
		h.Set("Content-Length", "0")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.Set("Access-Control-Expose-Headers", corsExposed)
	c.next.ServeHTTP(w, r)
}

// validHeaderList: a comma-separated list of header names (token
// characters), at most 2 KB; anything else is not echoed.
func validHeaderList(s string) bool {
	if len(s) > 2048 {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', ch == '-', ch == '_', ch == ',', ch == ' ':
		default:
			return false
		}
	}
	return true
}
