// Package console serves the built-in web console: static HTML, CSS and
// JavaScript modules embedded in the binary. The page is a client of the
// DynamoDB JSON API on the same origin (POST / with X-Amz-Target, signed
// with SigV4 in the page when access keys are configured), so the console
// holds no privileges of its own: see docs/console.md and its ADR.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the console is served under.
const Prefix = "/console/"

// contentSecurityPolicy allows only the console's own files: no inline
// script or style, no other origin, no framing, no plugins, no forms
// posted anywhere. The API is fetched from the same origin.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var files = func() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err)
	}
	return sub
}()

// types are set explicitly: the host's mime database may lack .mjs or map
// .js to a type a strict browser refuses for a module under nosniff.
var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	// Revalidated (by ETag) on every load, so a new binary's console is
	// used at once.
	h.Set("Cache-Control", "no-cache")
}

// Handler serves the console's files under Prefix.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if name == "" {
			name = "index.html"
		}
		name = path.Clean(name)
		if !fs.ValidPath(name) || strings.HasPrefix(name, ".") {
			http.NotFound(w, r)
			return
		}
		b, err := fs.ReadFile(files, name)
		if err != nil {
			// A directory or a missing file: no listings.
			http.NotFound(w, r)
			return
		}
		ct := types[path.Ext(name)]
		if ct == "" {
			ct = mime.TypeByExtension(path.Ext(name))
		}
		if ct == "" {
			ct = "application/octet-stream"
		}
		w.Header().Set("Content-Type", ct)
		sum := sha256.Sum256(b)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:16])+`"`)
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	})
}

// Wrap routes the console's paths to the console and everything else to
// api: Prefix (and its bare form) serves the console, and a browser's GET
// of / (Accept names text/html) is redirected there. Every other request,
// POST / above all, is the API's.
func Wrap(api http.Handler) http.Handler {
	console := Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case strings.HasPrefix(p, Prefix):
			console.ServeHTTP(w, r)
		case p == strings.TrimSuffix(Prefix, "/") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			http.Redirect(w, r, Prefix, http.StatusFound)
		case p == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) && acceptsHTML(r):
			http.Redirect(w, r, Prefix, http.StatusFound)
		default:
			api.ServeHTTP(w, r)
		}
	})
}

func acceptsHTML(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(strings.ToLower(v), "text/html") {
			return true
		}
	}
	return false
}
