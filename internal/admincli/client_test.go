package admincli

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/extenddb/extenddb/internal/api"
	"github.com/extenddb/extenddb/internal/backend/memory"
	"github.com/extenddb/extenddb/internal/config"
	"github.com/extenddb/extenddb/internal/engine"
)

// TestClientSigns: the CLI's client signs with the first configured key
// and a server verifying SigV4 accepts it; a client with another secret
// is refused with the server's answer.
func TestClientSigns(t *testing.T) {
	key := config.AccessKey{AccessKeyID: "AKIDCLIENTSIGNS0001", SecretAccessKey: "client-signs-secret"}
	eng := engine.New(memory.New(memory.Options{ItemSize: engine.ItemSize}), engine.Options{})
	h := api.New(eng, api.Options{Auth: api.NewAuthenticator([]api.AccessKey{{AccessKeyID: key.AccessKeyID, SecretAccessKey: key.SecretAccessKey}})})
	srv := httptest.NewServer(h)
	defer srv.Close()

	cfg := config.Default()
	cfg.Auth.Keys = []config.AccessKey{key}
	var out struct{ TableNames []string }
	if err := NewClient(srv.URL, cfg).Call(t.Context(), "ListTables", map[string]any{}, &out); err != nil {
		t.Fatalf("a signed call: %v", err)
	}

	cfg.Auth.Keys[0].SecretAccessKey = "another-secret"
	err := NewClient(srv.URL, cfg).Call(t.Context(), "ListTables", map[string]any{}, &out)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Type == "" {
		t.Fatalf("a call signed with another secret: %v, want the server's refusal", err)
	}
}
