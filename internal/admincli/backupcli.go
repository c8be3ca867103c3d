package admincli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/extenddb/extenddb/internal/backup"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/config"
	"github.com/extenddb/extenddb/internal/engine"
	"github.com/extenddb/extenddb/internal/server"
)

// VerifyBackup checks a backup in the configured store offline, like
// `sha256sum -c` plus every format rule (docs/backup-design.md section 1),
// and answers the first failure, which names the bad object. It needs no
// server and no database.
func VerifyBackup(ctx context.Context, cfg config.Config, arn string, w io.Writer) error {
	if cfg.Backup.Store.Kind == "" || cfg.Backup.Store.Kind == blobstore.KindDisabled {
		return errors.New("no backup store is configured: set [backup.store] in the configuration (or EXTENDDB__BACKUP__STORE__KIND and ..._ROOT)")
	}
	st, err := blobstore.Open(ctx, cfg.Backup.Store)
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

// ListPITRTables prints every point-in-time recovery history in the
// configured store with its restorable window (`extenddb backup
// pitr-tables`): the tables a server of this store can restore with
// RestoreTableToPointInTime by ARN, whether or not its catalog holds them.
// It reads the store only.
func ListPITRTables(ctx context.Context, cfg config.Config, w io.Writer) error {
	if cfg.Backup.Store.Kind == "" || cfg.Backup.Store.Kind == blobstore.KindDisabled {
		return errors.New("no backup store is configured: set [backup.store] in the configuration (or EXTENDDB__BACKUP__STORE__KIND and ..._ROOT)")
	}
	st, err := blobstore.Open(ctx, cfg.Backup.Store)
	if err != nil {
		return fmt.Errorf("backup.store: %w", err)
	}
	hs, err := backup.ListHistories(ctx, st)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tEARLIEST\tLATEST\tDAYS\tTABLE ARN\tHISTORY")
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	for _, h := range hs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", h.Head.TableName, ts(h.Earliest), ts(h.Latest), h.Head.RecoveryPeriodInDays,
			h.Head.TableArn, h.Prefix)
	}
	return tw.Flush()
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
		if err := c.sign(req, body); err != nil {
			return err
		}
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

// sign signs r with SigV4 for service dynamodb (the AWS SDK's signer),
// covering the payload hash, which it also sends as X-Amz-Content-Sha256.
func (c *Client) sign(r *http.Request, body []byte) error {
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	r.Header.Set("X-Amz-Content-Sha256", payload)
	creds := aws.Credentials{AccessKeyID: c.AccessKey, SecretAccessKey: c.Secret}
	return v4.NewSigner().SignHTTP(r.Context(), creds, r, payload, "dynamodb", c.Region, c.now().UTC())
}

// SyncOptions are the options of `extenddb backup sync` (the CLI wires
// only through this package). MoveStore and ForgetStore may name a store
// by its id (st-...), or by a filesystem root or an s3://bucket/prefix URL
// whose identity file names it (the S3 settings other than bucket and
// prefix are the configured store's).
type SyncOptions = backup.SyncOptions

// SyncBackups runs `extenddb backup sync` on the configured catalog and
// store, shows progress on progress (a bar on a terminal, plain lines
// otherwise; nil for none) and prints the entries and a summary table on
// w. With a SQLite catalog the server must not be running (one process
// per database file). It fails (exit status non-zero) when anything was
// reported but not fixed: incomplete or damaged prefixes, missing backups
// not pruned, rows of another store, backups that do not verify for a
// move.
func SyncBackups(ctx context.Context, cfg config.Config, opt SyncOptions, w, progress io.Writer) error {
	if cfg.Backup.Store.Kind == "" || cfg.Backup.Store.Kind == blobstore.KindDisabled {
		return errors.New("no backup store is configured: set [backup.store] in the configuration")
	}
	st, err := blobstore.Open(ctx, cfg.Backup.Store)
	if err != nil {
		return fmt.Errorf("backup.store: %w", err)
	}
	if opt.MoveStore != "" {
		if opt.MoveStore, err = resolveStoreID(ctx, cfg.Backup.Store, opt.MoveStore); err != nil {
			return fmt.Errorf("--move-store: %w", err)
		}
	}
	if opt.ForgetStore != "" {
		if opt.ForgetStore, err = resolveStoreID(ctx, cfg.Backup.Store, opt.ForgetStore); err != nil {
			return fmt.Errorf("--forget-store: %w", err)
		}
	}
	b, err := server.OpenBackend(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer b.Close()
	if progress != nil && opt.Progress == nil {
		opt.Progress = newSyncProgress(progress)
	}
	eng := engine.New(b, engine.Options{Region: cfg.Server.Region})
	entries, err := backup.Sync(ctx, b, st, eng, opt)
	unfixed := printSyncReport(w, entries)
	if err != nil {
		return err
	}
	if unfixed > 0 {
		return fmt.Errorf("%d backup prefix(es) or row(s) reported and not fixed (see above)", unfixed)
	}
	return nil
}

// syncSummary is the order and wording of the summary table.
var syncSummary = []struct{ outcome, label string }{
	{backup.OutcomeAdopted, "adopted"}, {backup.OutcomeAdoptable, "adoptable (dry run)"},
	{backup.OutcomeKnown, "already known"}, {backup.OutcomeIncomplete, "incomplete"},
	{backup.OutcomeDamaged, "damaged"}, {backup.OutcomeMissing, "missing"}, {backup.OutcomePruned, "pruned"},
	{backup.OutcomeOtherStore, "rows of another store"},
	{backup.OutcomeMoved, "moved"}, {backup.OutcomeMovable, "movable (dry run)"},
	{backup.OutcomeForgotten, "forgotten"}, {backup.OutcomeForgettable, "forgettable (dry run)"},
	{backup.OutcomeNotFound, "not found"},
	{backup.OutcomeStoreAdopted, "store taken over"}, {backup.OutcomeStoreAdoptable, "store to take over (dry run)"},
	{backup.OutcomeStoreRefused, "store takeover refused (dry run)"},
}

// printSyncReport prints the entries, the summary table and the summary
// line, and answers how many entries are unfixed.
func printSyncReport(w io.Writer, entries []backup.SyncEntry) int {
	counts := map[string]int{}
	unfixed := 0
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(entries) > 0 {
		fmt.Fprintln(tw, "PREFIX\tOUTCOME\tARN\tDETAIL")
		for _, e := range entries {
			counts[e.Outcome]++
			if backup.Unfixed(e.Outcome) {
				unfixed++
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", orNone(e.Prefix), e.Outcome, orNone(e.ARN), e.Detail)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	fmt.Fprintln(tw, "SUMMARY\tCOUNT")
	var line []string
	for _, s := range syncSummary {
		n := counts[s.outcome]
		switch s.outcome {
		case backup.OutcomeAdopted, backup.OutcomeKnown, backup.OutcomeIncomplete, backup.OutcomeMissing,
			backup.OutcomePruned, backup.OutcomeMoved, backup.OutcomeForgotten:
		default:
			if n == 0 {
				continue
			}
		}
		fmt.Fprintf(tw, "%s\t%d\n", s.label, n)
		line = append(line, fmt.Sprintf("%d %s", n, s.outcome))
	}
	tw.Flush()
	fmt.Fprintln(w, strings.Join(line, ", "))
	return unfixed
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// resolveStoreID answers the store id arg names: an id as it is, else the
// identity of the store at a filesystem root or s3://bucket/prefix.
func resolveStoreID(ctx context.Context, base blobstore.Config, arg string) (string, error) {
	if strings.HasPrefix(arg, "st-") {
		return arg, nil
	}
	var cfg blobstore.Config
	switch {
	case strings.HasPrefix(arg, "s3://"):
		bucket, prefix, _ := strings.Cut(strings.TrimPrefix(arg, "s3://"), "/")
		cfg = base
		cfg.Kind, cfg.Root, cfg.Bucket, cfg.Prefix = blobstore.KindS3, "", bucket, strings.Trim(prefix, "/")
	case strings.HasPrefix(arg, "/"):
		cfg = blobstore.Config{Kind: blobstore.KindFilesystem, Root: arg}
	default:
		return "", fmt.Errorf("%q is neither a store id (st-...), an absolute directory nor an s3://bucket/prefix URL", arg)
	}
	st, err := blobstore.Open(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("%s: %w (name the store by its id, st-..., when it is gone)", arg, err)
	}
	id, err := blobstore.ReadIdentity(ctx, st)
	if err != nil {
		return "", fmt.Errorf("%s: %w (name the store by its id, st-..., when its identity is lost)", arg, err)
	}
	return id.StoreID, nil
}
