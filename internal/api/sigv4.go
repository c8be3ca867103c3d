package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// AccessKey maps an access key id to its secret and account.
type AccessKey struct {
	AccessKeyID     string
	SecretAccessKey string
	Account         string
}

// Authenticator verifies AWS Signature Version 4 on requests. With no keys
// it accepts every request as DefaultAccount (the loopback development
// default; config refuses a non-loopback listener without keys unless the
// operator opts in).
type Authenticator struct {
	keys map[string]AccessKey
	now  func() time.Time
}

// NewAuthenticator returns an authenticator over keys (none: accept all).
func NewAuthenticator(keys []AccessKey) *Authenticator {
	a := &Authenticator{keys: map[string]AccessKey{}, now: time.Now}
	for _, k := range keys {
		a.keys[k.AccessKeyID] = k
	}
	return a
}

// Enabled reports whether signatures are verified.
func (a *Authenticator) Enabled() bool { return a != nil && len(a.keys) > 0 }

// authError is an authentication failure with its wire code.
type authError struct {
	code, msg string
}

func (e *authError) Error() string { return e.code + ": " + e.msg }

const (
	codeMissingToken     = "MissingAuthenticationTokenException"
	codeUnrecognized     = "UnrecognizedClientException"
	codeInvalidSignature = "InvalidSignatureException"
	sigV4Algorithm       = "AWS4-HMAC-SHA256"
	maxClockSkew         = 15 * time.Minute
)

var errSignatureMismatch = &authError{codeInvalidSignature, "The request signature we calculated does not match the signature you provided. " +
	"Check your AWS Secret Access Key and signing method. Consult the service documentation for details."}

// Authenticate verifies the request's signature against its real body and
// returns the account of the access key.
func (a *Authenticator) Authenticate(r *http.Request, body []byte) (string, error) {
	sc, err := a.CheckHeaders(r)
	if err != nil {
		return "", err
	}
	return sc.VerifyBody(r, body)
}

// SigCheck is a request whose signature headers passed CheckHeaders; its
// body still has to be verified with VerifyBody.
type SigCheck struct {
	enabled                     bool
	key                         AccessKey
	date, region, service       string
	amzDate, signedHeaders, sig string
	// headerHash is the x-amz-content-sha256 value when it names the
	// payload's hash; the signature was then verified from the headers.
	headerHash string
}

// CheckHeaders verifies everything a request's headers can prove before
// its body is read: an Authorization header of a known key, its scope and
// date, and, when x-amz-content-sha256 carries the payload hash (which the
// signature covers), the signature itself. A request that fails here is
// answered without reading its body.
func (a *Authenticator) CheckHeaders(r *http.Request) (*SigCheck, error) {
	if !a.Enabled() {
		return &SigCheck{}, nil
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return nil, &authError{codeMissingToken, "Request is missing Authentication Token"}
	}
	if !strings.HasPrefix(auth, sigV4Algorithm+" ") {
		return nil, &authError{codeInvalidSignature, "Only " + sigV4Algorithm + " signatures are supported"}
	}
	var credential, signedHeaders, signature string
	for _, part := range strings.Split(strings.TrimPrefix(auth, sigV4Algorithm+" "), ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "Credential":
			credential = v
		case "SignedHeaders":
			signedHeaders = v
		case "Signature":
			signature = v
		}
	}
	if credential == "" || signedHeaders == "" || signature == "" {
		return nil, &authError{codeInvalidSignature, "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters"}
	}
	scope := strings.Split(credential, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return nil, &authError{codeInvalidSignature, "Credential should be scoped to a valid region, service and date: " + credential}
	}
	key, ok := a.keys[scope[0]]
	if !ok {
		return nil, &authError{codeUnrecognized, "The security token included in the request is invalid."}
	}
	date, region, service := scope[1], scope[2], scope[3]
	if service != "dynamodb" {
		return nil, &authError{codeInvalidSignature, "Credential should be scoped to correct service: 'dynamodb'."}
	}
	amzDate := r.Header.Get("X-Amz-Date")
	t, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || !strings.HasPrefix(amzDate, date) {
		return nil, &authError{codeInvalidSignature, "The request must contain a valid X-Amz-Date header matching the credential scope date"}
	}
	if now := a.now(); t.Before(now.Add(-maxClockSkew)) || t.After(now.Add(maxClockSkew)) {
		return nil, &authError{codeInvalidSignature, "Signature expired: " + amzDate + " is outside the allowed clock skew of 15 minutes from " +
			now.UTC().Format("20060102T150405Z")}
	}
	sc := &SigCheck{enabled: true, key: key, date: date, region: region, service: service,
		amzDate: amzDate, signedHeaders: signedHeaders, sig: signature}
	if h := r.Header.Get("X-Amz-Content-Sha256"); isPayloadHash(h) {
		// The signer signed this value as the payload hash: the
		// signature can be checked now, the body against it once read.
		sc.headerHash = strings.ToLower(h)
		if err := sc.verify(r, sc.headerHash); err != nil {
			return nil, err
		}
	}
	return sc, nil
}

// isPayloadHash reports whether h is a hex SHA-256 (not UNSIGNED-PAYLOAD
// or a streaming marker).
func isPayloadHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// VerifyBody checks the body against the signature (or against the
// x-amz-content-sha256 header the signature covered) and returns the
// account of the access key.
func (sc *SigCheck) VerifyBody(r *http.Request, body []byte) (string, error) {
	if !sc.enabled {
		return DefaultAccount, nil
	}
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if sc.headerHash != "" {
		if sc.headerHash != payloadHash {
			return "", errHashMismatch
		}
	} else {
		if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != payloadHash && h != "UNSIGNED-PAYLOAD" {
			return "", errHashMismatch
		}
		if err := sc.verify(r, payloadHash); err != nil {
			return "", err
		}
	}
	account := sc.key.Account
	if account == "" {
		account = DefaultAccount
	}
	return account, nil
}

var errHashMismatch = &authError{codeInvalidSignature, "The provided 'x-amz-content-sha256' header does not match what was computed."}

// verify checks the signature with payloadHash as the canonical payload.
func (sc *SigCheck) verify(r *http.Request, payloadHash string) error {
	canonical, ok := canonicalRequest(r, sc.signedHeaders, payloadHash)
	if !ok {
		return errSignatureMismatch
	}
	crSum := sha256.Sum256([]byte(canonical))
	scopeStr := sc.date + "/" + sc.region + "/" + sc.service + "/aws4_request"
	toSign := sigV4Algorithm + "\n" + sc.amzDate + "\n" + scopeStr + "\n" + hex.EncodeToString(crSum[:])
	k := hmacSHA256([]byte("AWS4"+sc.key.SecretAccessKey), sc.date)
	k = hmacSHA256(k, sc.region)
	k = hmacSHA256(k, sc.service)
	k = hmacSHA256(k, "aws4_request")
	want := hex.EncodeToString(hmacSHA256(k, toSign))
	if !hmac.Equal([]byte(want), []byte(sc.sig)) {
		return errSignatureMismatch
	}
	return nil
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// canonicalRequest builds SigV4's canonical request; ok is false when a
// signed header is missing.
func canonicalRequest(r *http.Request, signedHeaders, payloadHash string) (string, bool) {
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	b.WriteString(path)
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(r.URL.Query()))
	b.WriteByte('\n')
	names := strings.Split(signedHeaders, ";")
	for _, n := range names {
		var v string
		switch n {
		case "host":
			v = r.Host
		case "content-length":
			v = r.Header.Get("Content-Length")
			if v == "" && r.ContentLength >= 0 {
				v = strconv.FormatInt(r.ContentLength, 10)
			}
		default:
			vals, ok := r.Header[http.CanonicalHeaderKey(n)]
			if !ok {
				return "", false
			}
			trimmed := make([]string, len(vals))
			for i, x := range vals {
				trimmed[i] = strings.Join(strings.Fields(x), " ")
			}
			v = strings.Join(trimmed, ",")
		}
		b.WriteString(n)
		b.WriteByte(':')
		b.WriteString(strings.TrimSpace(v))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(signedHeaders)
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String(), true
}

func canonicalQuery(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		vs := append([]string(nil), q[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			parts = append(parts, sigEscape(k)+"="+sigEscape(v))
		}
	}
	return strings.Join(parts, "&")
}

func sigEscape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}
