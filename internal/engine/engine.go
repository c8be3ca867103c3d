// Package engine implements DynamoDB's semantics over a storage backend:
// request validation, expressions, item operations, paging, limits and
// error wording. It owns DynamoDB; the backend owns durability.
package engine

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/extenddb/extenddb/internal/backend"
)

// Options configure an Engine.
type Options struct {
	// Region appears in ARNs; default us-east-1.
	Region string
	// Logger receives operational messages; default discards.
	Logger *slog.Logger
	// TableCacheTTL bounds how long a parsed table description is reused
	// before it is read again (changes by other servers); default 1s.
	TableCacheTTL time.Duration
	// TableListTTL bounds how long the background loops (TTL sweeper,
	// streams, point-in-time recovery shipping) reuse their list of
	// tables when this server changed none (changes by other servers);
	// default 30s.
	TableListTTL time.Duration
	// Now overrides the clock (tests).
	Now func() time.Time
	// SweepInterval is the TTL sweeper's pause after a pass that found no
	// backlog; default 5s.
	SweepInterval time.Duration
	// StatsInterval is how old table statistics (DescribeTable's
	// ItemCount, TableSizeBytes, IndexSizeBytes) may be before a
	// description recomputes them; default 1s.
	StatsInterval time.Duration
	// Registerer receives the background-work metrics (bgmetrics.go); nil
	// registers nothing.
	Registerer prometheus.Registerer
	// StreamShardInterval is how long a stream shard stays open before it
	// rolls over to a child shard; default 4h (as DynamoDB).
	StreamShardInterval time.Duration
	// StreamRetention is how long stream records are kept; default 24h.
	StreamRetention time.Duration
	// StreamCheckInterval is the pause of the background stream loop
	// (rollover, settling closed shards); default 10s.
	StreamCheckInterval time.Duration
	// StreamTrimInterval is how often records past retention are trimmed;
	// default 1m.
	StreamTrimInterval time.Duration
	// StreamIteratorLifetime is how long a shard iterator may be used;
	// default IteratorLifetime (15 minutes, as DynamoDB).
	StreamIteratorLifetime time.Duration
}

// Engine executes DynamoDB operations.
type Engine struct {
	backend       backend.Backend
	region        string
	log           *slog.Logger
	tables        tableCache
	tableList     tableList // the background loops' shared list (table_list.go)
	idem          idempotency
	bg            background
	bgm           *bgMetrics
	sweepInterval time.Duration
	stats         statsCache
	now           func() time.Time
	backups       BackupService // nil: no backup store configured
	backupsOff    string        // why backups are unavailable (SetBackupsUnavailable)
	pitrSvc       PITRService   // nil: point-in-time recovery cannot be turned on
	exports       ExportService // nil: exports are refused
	imports       ImportService // nil: no backup store configured
	sm            *streamMetrics
	shardInterval time.Duration
	retention     time.Duration
	streamCheck   time.Duration
	trimInterval  time.Duration
	// iteratorLifetime bounds the use of a shard iterator.
	iteratorLifetime time.Duration
	statements       statementCache // parsed PartiQL statements
}

// New returns an engine over a backend.
func New(b backend.Backend, opt Options) *Engine {
	e := &Engine{backend: b, region: opt.Region, log: opt.Logger, now: opt.Now}
	if e.region == "" {
		e.region = "us-east-1"
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.now == nil {
		e.now = time.Now
	}
	ttl := opt.TableCacheTTL
	if ttl <= 0 {
		ttl = time.Second
	}
	e.tables = tableCache{m: map[string]*table{}, ttl: ttl}
	e.tableList.ttl = orDefault(opt.TableListTTL, defaultTableListTTL)
	e.bgm = newBGMetrics(opt.Registerer)
	e.sm = newStreamMetrics(opt.Registerer)
	e.shardInterval = orDefault(opt.StreamShardInterval, defaultShardInterval)
	e.retention = orDefault(opt.StreamRetention, defaultStreamRetention)
	e.streamCheck = orDefault(opt.StreamCheckInterval, 10*time.Second)
	e.trimInterval = orDefault(opt.StreamTrimInterval, time.Minute)
	e.iteratorLifetime = orDefault(opt.StreamIteratorLifetime, IteratorLifetime)
	e.sweepInterval = opt.SweepInterval
	if e.sweepInterval <= 0 {
		e.sweepInterval = 5 * time.Second
	}
	e.stats.interval = opt.StatsInterval
	if e.stats.interval <= 0 {
		e.stats.interval = defaultStatsInterval
	}
	return e
}

// Region returns the region the engine reports.
func (e *Engine) Region() string { return e.region }

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
