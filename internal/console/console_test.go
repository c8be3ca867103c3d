package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func serve(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

var apiReached = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Test", "api")
	w.WriteHeader(http.StatusTeapot)
})

func TestServesFilesWithStrictHeaders(t *testing.T) {
	h := Wrap(apiReached)
	for path, ct := range map[string]string{
		"/console/":            "text/html; charset=utf-8",
		"/console/index.html":  "text/html; charset=utf-8",
		"/console/app.js":      "text/javascript; charset=utf-8",
		"/console/api.js":      "text/javascript; charset=utf-8",
		"/console/dom.js":      "text/javascript; charset=utf-8",
		"/console/metrics.js":  "text/javascript; charset=utf-8",
		"/console/jobs.js":     "text/javascript; charset=utf-8",
		"/console/console.css": "text/css; charset=utf-8",
		"/console/favicon.svg": "image/svg+xml",
	} {
		w := serve(t, h, http.MethodGet, path, nil)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, w.Code)
		}
		if got := w.Header().Get("Content-Type"); got != ct {
			t.Errorf("GET %s: Content-Type %q, want %q", path, got, ct)
		}
		csp := w.Header().Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP allows unsafe sources: %q", path, csp)
		}
		if w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", path)
		}
		if w.Header().Get("ETag") == "" {
			t.Errorf("GET %s: no ETag", path)
		}
	}
}

// The page holds no inline script or style (the CSP would block it) and
// the scripts never parse HTML out of data.
func TestNoInlineCodeNorHTMLParsing(t *testing.T) {
	idx := serve(t, Handler(), http.MethodGet, "/console/", nil).Body.String()
	for _, bad := range []string{"<style", "style=", "onclick=", "onload=", "javascript:"} {
		if strings.Contains(idx, bad) {
			t.Errorf("index.html contains %q", bad)
		}
	}
	if strings.Count(idx, "<script") != 1 || !strings.Contains(idx, `<script type="module" src="app.js"></script>`) {
		t.Errorf("index.html should load exactly one external module script")
	}
	for _, f := range []string{"app.js", "api.js", "dom.js", "metrics.js", "jobs.js"} {
		js := serve(t, Handler(), http.MethodGet, "/console/"+f, nil).Body.String()
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
			if strings.Contains(js, bad) {
				t.Errorf("%s uses %s", f, bad)
			}
		}
	}
}

func TestRouting(t *testing.T) {
	h := Wrap(apiReached)
	// A browser opening / is sent to the console.
	w := serve(t, h, http.MethodGet, "/", map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
	if w.Code != http.StatusFound || w.Header().Get("Location") != "/console/" {
		t.Errorf("GET / as a browser: %d %q", w.Code, w.Header().Get("Location"))
	}
	w = serve(t, h, http.MethodGet, "/console", nil)
	if w.Code != http.StatusFound || w.Header().Get("Location") != "/console/" {
		t.Errorf("GET /console: %d %q", w.Code, w.Header().Get("Location"))
	}
	// The API keeps everything else: POST / above all, and a GET / that
	// does not ask for HTML.
	for _, c := range []struct {
		method, path string
		hdr          map[string]string
	}{
		{http.MethodPost, "/", map[string]string{"Accept": "text/html"}},
		{http.MethodPost, "/", nil},
		{http.MethodGet, "/", map[string]string{"Accept": "application/json"}},
		{http.MethodGet, "/health", nil},
		{http.MethodPost, "/console", nil},
		{http.MethodGet, "/consolex", nil},
	} {
		if w := serve(t, h, c.method, c.path, c.hdr); w.Header().Get("X-Test") != "api" {
			t.Errorf("%s %s: not routed to the API (%d)", c.method, c.path, w.Code)
		}
	}
	for _, path := range []string{"/console/missing.js", "/console/../console.go", "/console/.hidden", "/console/assets/"} {
		if w := serve(t, h, http.MethodGet, path, nil); w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, w.Code)
		}
	}
	if w := serve(t, h, http.MethodPost, "/console/", nil); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /console/: %d, want 405", w.Code)
	}
	// Revalidation answers 304.
	etag := serve(t, h, http.MethodGet, "/console/app.js", nil).Header().Get("ETag")
	if w := serve(t, h, http.MethodGet, "/console/app.js", map[string]string{"If-None-Match": etag}); w.Code != http.StatusNotModified {
		t.Errorf("If-None-Match: %d, want 304", w.Code)
	}
}
