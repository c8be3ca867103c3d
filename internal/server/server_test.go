package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/config"
)

// TestServeTLSAndShutdown: with a certificate configured the server
// answers HTTPS, and cancelling its context shuts it down cleanly.
func TestServeTLSAndShutdown(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)

	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Server.TLSCertFile, cfg.Server.TLSKeyFile = certFile, keyFile
	cfg.Storage.Memory = true
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler), func(a net.Addr) { addrc <- a }) }()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("server did not start: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(mustParse(t, der))
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := cl.Get("https://" + addr.String() + "/health")
	if err != nil {
		t.Fatalf("https: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != `{"status":"ok"}` {
		t.Fatalf("health over TLS: %d %s", resp.StatusCode, b)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
}

func mustParse(t *testing.T, der []byte) *x509.Certificate {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOpenBackendMemory: storage.memory opens the native in-memory
// backend; storage.memory_engine = "sqlite" keeps SQLite in a temporary
// file; without memory the data directory's SQLite database.
func TestOpenBackendMemory(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		memory  bool
		engine  string
		backend string
		want    string
	}{
		{true, "", "", "memory"},
		{true, config.MemoryNative, "", "memory"},
		{true, config.MemorySQLite, "", "sqlite"},
		{false, config.MemoryNative, "", "sqlite"},
		{false, config.MemoryNative, "memory", "memory"},
	} {
		cfg := config.Default()
		if c.backend != "" {
			cfg.Storage.Backend = c.backend
		}
		cfg.Storage.Memory = c.memory
		if c.engine != "" {
			cfg.Storage.MemoryEngine = c.engine
		}
		cfg.Storage.DataDir = t.TempDir()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		b, err := OpenBackend(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if b.Name() != c.want {
			t.Errorf("memory=%v engine=%q: backend %s, want %s", c.memory, c.engine, b.Name(), c.want)
		}
		b.Close()
	}
}
