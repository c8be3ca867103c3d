package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/extenddb/extenddb/internal/backup"
	"github.com/extenddb/extenddb/internal/config"
	"github.com/extenddb/extenddb/internal/engine"
	"github.com/extenddb/extenddb/internal/store"
)

// VerifyBackup checks a backup in the configured store offline, like
// `sha256sum -c` plus every format rule (docs/backup-design.md section 1),
// and answers the first failure, which names the bad object. It needs no
// server and no database.
func VerifyBackup(ctx context.Context, cfg config.Config, arn string, w io.Writer) error {
	if cfg.Backup.Store.Kind == "" || cfg.Backup.Store.Kind == store.KindDisabled {
		return errors.New("no backup store is configured: set [backup.store] in the configuration (or EXTENDDB__BACKUP__STORE__KIND and ..._ROOT)")
	}
	st, err := store.Open(ctx, cfg.Backup.Store)
	if err != nil {
		return fmt.Errorf("backup.store: %w", err)
	}
	b, err := backup.Verify(ctx, st, arn)
	if err != nil {
		return fmt.Errorf("backup %s does not verify: %w", arn, err)
	}
	fmt.Fprintf(w, "OK %s\n  name %s, created %s, %d items in %d data files, %d bytes (%d compressed), store %s\n",
		arn, b.BackupName, b.BackupCreationDateTime.UTC().Format(time.RFC3339), b.ItemCount, len(b.DataFiles),
		b.UncompressedBytes, b.CompressedBytes, st)
	return nil
}

// Client is a minimal DynamoDB JSON client for the CLI: it signs requests
// with SigV4 when it has a key (the configuration's first auth.keys entry).
type Client struct {
	Endpoint, Region  string
	AccessKey, Secret string
	HTTP              *http.Client
	now               func() time.Time
}

// NewClient builds a client for endpoint, signing with the first
// configured access key, if any.
func NewClient(endpoint string, cfg config.Config) *Client {
	c := &Client{Endpoint: strings.TrimRight(endpoint, "/"), Region: cfg.Server.Region, HTTP: &http.Client{Timeout: 60 * time.Second}, now: time.Now}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if len(cfg.Auth.Keys) > 0 {
		c.AccessKey, c.Secret = cfg.Auth.Keys[0].AccessKeyID, cfg.Auth.Keys[0].SecretAccessKey
	}
	return c
}

// APIError is a DynamoDB error answer.
type APIError struct {
	Type, Message string
	Status        int
}

func (e *APIError) Error() string {
	t := e.Type
	if i := strings.LastIndexByte(t, '#'); i >= 0 {
		t = t[i+1:]
	}
	return t + ": " + e.Message
}

// Call runs one operation: in is marshalled as the request, the response
// decoded into out (when not nil).
func (c *Client) Call(ctx context.Context, op string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Endpoint+"/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	if c.AccessKey != "" {
		c.sign(req, body)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Endpoint, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(data, &e)
		return &APIError{Type: e.Type, Message: e.Message, Status: resp.StatusCode}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// sign adds a SigV4 Authorization header (service dynamodb).
func (c *Client) sign(r *http.Request, body []byte) {
	t := c.now().UTC()
	amzDate, day := t.Format("20060102T150405Z"), t.Format("20060102")
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	r.Header.Set("X-Amz-Date", amzDate)
	r.Header.Set("X-Amz-Content-Sha256", payload)
	u, _ := url.Parse(c.Endpoint)
	host := u.Host
	signed := "content-type;host;x-amz-content-sha256;x-amz-date;x-amz-target"
	canonical := strings.Join([]string{"POST", "/", "",
		"content-type:" + r.Header.Get("Content-Type"), "host:" + host,
		"x-amz-content-sha256:" + payload, "x-amz-date:" + amzDate,
		"x-amz-target:" + r.Header.Get("X-Amz-Target"), "", signed, payload}, "\n")
	cs := sha256.Sum256([]byte(canonical))
	scope := day + "/" + c.Region + "/dynamodb/aws4_request"
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(cs[:])
	mac := func(key []byte, s string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(s))
		return h.Sum(nil)
	}
	k := mac(mac(mac(mac([]byte("AWS4"+c.Secret), day), c.Region), "dynamodb"), "aws4_request")
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+c.AccessKey+"/"+scope+
		", SignedHeaders="+signed+", Signature="+hex.EncodeToString(mac(k, toSign)))
}

// SyncOptions are the options of `extenddb backup sync` (the CLI wires
// only through this package).
type SyncOptions = backup.SyncOptions

// SyncBackups runs `extenddb backup sync` on the configured catalog and
// store and prints a summary table. With a SQLite catalog the server must
// not be running (one process per database file). It fails (exit status
// non-zero) when anything was reported but not fixed: incomplete or
// damaged prefixes, missing backups not pruned.
func SyncBackups(ctx context.Context, cfg config.Config, opt SyncOptions, w io.Writer) error {
	if cfg.Backup.Store.Kind == "" || cfg.Backup.Store.Kind == store.KindDisabled {
		return errors.New("no backup store is configured: set [backup.store] in the configuration")
	}
	st, err := store.Open(ctx, cfg.Backup.Store)
	if err != nil {
		return fmt.Errorf("backup.store: %w", err)
	}
	b, err := OpenBackend(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer b.Close()
	eng := engine.New(b, engine.Options{Region: cfg.Server.Region})
	entries, err := backup.Sync(ctx, b, st, eng, opt)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PREFIX\tOUTCOME\tDETAIL")
	counts := map[string]int{}
	for _, e := range entries {
		counts[e.Outcome]++
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Prefix, e.Outcome, e.Detail)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d adopted, %d adoptable (dry run), %d known, %d incomplete, %d damaged, %d missing, %d pruned\n",
		counts["adopted"], counts["adoptable"], counts["known"], counts["incomplete"], counts["damaged"], counts["missing"], counts["pruned"])
	if err != nil {
		return err
	}
	if n := counts["incomplete"] + counts["damaged"] + counts["missing"]; n > 0 {
		return fmt.Errorf("%d backup prefix(es) or row(s) reported and not fixed (see above)", n)
	}
	return nil
}
