package admincli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/extenddb/extenddb/internal/config"
)

// WriteConfig writes cfg as TOML to path, refusing to overwrite unless
// force. The file is created 0600 (it may hold a DSN with a password).
func WriteConfig(path string, cfg config.Config, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists; use --force to overwrite it", path)
		}
		return err
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, "# extenddb configuration, written by `extenddb init`. See docs/configuration.md."); err != nil {
		return err
	}
	if err := toml.NewEncoder(f).Encode(cfg); err != nil {
		return err
	}
	// The configured backend's own section, [storage.<name>].
	if sec := cfg.Storage.Section(cfg.Storage.Backend); sec != nil {
		if _, err := fmt.Fprintf(f, "\n[storage.%s]\n", cfg.Storage.Backend); err != nil {
			return err
		}
		if err := toml.NewEncoder(f).Encode(sec); err != nil {
			return err
		}
	}
	return f.Sync()
}

// Healthcheck asks a running server's /ready endpoint.
func Healthcheck(ctx context.Context, endpoint string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(endpoint, "/")+"/ready", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("not reachable: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		return fmt.Errorf("not ready: HTTP 503 from %s/ready: the server runs but its storage backend (or backup store) is unreachable; its log says why (\"not ready\")", strings.TrimRight(endpoint, "/"))
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready: HTTP %d from %s/ready", resp.StatusCode, strings.TrimRight(endpoint, "/"))
	}
	return nil
}

// NewAccessKey mints an access key id ("EXDB" + 16 characters) and a
// 40-character secret for an account.
func NewAccessKey(account string) (config.AccessKey, error) {
	const idChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	const secretChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	pick := func(chars string, n int) (string, error) {
		b := make([]byte, n)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		for i := range b {
			b[i] = chars[int(b[i])%len(chars)]
		}
		return string(b), nil
	}
	id, err := pick(idChars, 16)
	if err != nil {
		return config.AccessKey{}, err
	}
	secret, err := pick(secretChars, 40)
	if err != nil {
		return config.AccessKey{}, err
	}
	return config.AccessKey{AccessKeyID: "EXDB" + id, SecretAccessKey: secret, Account: account}, nil
}
