package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/extenddb/extenddb/internal/backend/sqlite"
	"github.com/extenddb/extenddb/internal/engine"
)

var testKey = AccessKey{AccessKeyID: "AKIDEXTENDDBTEST0001", SecretAccessKey: "secret-secret-secret-0001", Account: "123456789012"}

func signed(t *testing.T, akid, secret, body string, at time.Time, mutate func(*http.Request)) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8000/", strings.NewReader(body))
	r.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	r.Header.Set("Content-Type", "application/x-amz-json-1.0")
	sum := sha256.Sum256([]byte(body))
	err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret},
		r, hex.EncodeToString(sum[:]), "dynamodb", "eu-west-1", at)
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(r)
	}
	return r
}

func TestSigV4(t *testing.T) {
	a := NewAuthenticator([]AccessKey{testKey})
	now := time.Now()
	body := `{"Limit":5}`
	if acct, err := a.Authenticate(signed(t, testKey.AccessKeyID, testKey.SecretAccessKey, body, now, nil), []byte(body)); err != nil || acct != "123456789012" {
		t.Fatalf("good signature: %q %v", acct, err)
	}
	cases := []struct {
		name string
		r    *http.Request
		body string
		code string
	}{
		{"wrong secret", signed(t, testKey.AccessKeyID, "not-the-secret-xxxxxxxx", body, now, nil), body, codeInvalidSignature},
		{"unknown key", signed(t, "AKIDUNKNOWNUNKNOWN01", testKey.SecretAccessKey, body, now, nil), body, codeUnrecognized},
		{"tampered body", signed(t, testKey.AccessKeyID, testKey.SecretAccessKey, body, now, nil), `{"Limit":6}`, codeInvalidSignature},
		{"tampered signed header", signed(t, testKey.AccessKeyID, testKey.SecretAccessKey, body, now, func(r *http.Request) {
			r.Header.Set("X-Amz-Target", "DynamoDB_20120810.DeleteTable")
		}), body, codeInvalidSignature},
		{"expired", signed(t, testKey.AccessKeyID, testKey.SecretAccessKey, body, now.Add(-20*time.Minute), nil), body, codeInvalidSignature},
		{"missing", signed(t, testKey.AccessKeyID, testKey.SecretAccessKey, body, now, func(r *http.Request) { r.Header.Del("Authorization") }), body, codeMissingToken},
	}
	for _, c := range cases {
		_, err := a.Authenticate(c.r, []byte(c.body))
		var ae *authError
		if !errors.As(err, &ae) || ae.code != c.code {
			t.Errorf("%s: got %v, want %s", c.name, err, c.code)
		}
	}
	if acct, err := NewAuthenticator(nil).Authenticate(httptest.NewRequest(http.MethodPost, "/", nil), nil); err != nil || acct != DefaultAccount {
		t.Errorf("no keys: %q %v", acct, err)
	}
}

// TestSigV4ThroughTheSDK: a real client with the right key works and its
// tables live in the key's account; a wrong secret is refused.
func TestSigV4ThroughTheSDK(t *testing.T) {
	b, err := sqlite.Open(context.Background(), sqlite.Options{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	srv := httptest.NewServer(New(engine.New(b, engine.Options{}), Options{Auth: NewAuthenticator([]AccessKey{testKey})}))
	defer srv.Close()
	client := func(secret string) *dynamodb.Client {
		return dynamodb.New(dynamodb.Options{BaseEndpoint: aws.String(srv.URL), Region: "us-east-1", Retryer: aws.NopRetryer{},
			Credentials: credentials.NewStaticCredentialsProvider(testKey.AccessKeyID, secret, "")})
	}
	if _, err := client(testKey.SecretAccessKey).ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("signed request refused: %v", err)
	}
	_, err = client("wrong-secret-wrong-secret").ListTables(context.Background(), &dynamodb.ListTablesInput{})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != codeInvalidSignature {
		t.Fatalf("wrong secret: %v", err)
	}
	// An unsigned request is refused too.
	req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewBufferString("{}"))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(out.String(), prefixService+codeMissingToken) {
		t.Fatalf("unsigned request: HTTP %d %s", resp.StatusCode, out.String())
	}
}
