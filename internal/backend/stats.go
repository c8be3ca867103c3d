package backend

import "time"

// Stats are a backend's operational statistics, read by the metrics
// collector on each scrape. A backend that has them implements
// StatsReporter; fields a backend does not have stay zero and the
// matching Has* flag false.
type Stats struct {
	// HasPool: the connection pool fields are set (PostgreSQL pool; the
	// SQLite reader pool).
	HasPool bool
	// PoolMax is the pool's bound; PoolInUse the connections lent out;
	// PoolIdle the open idle ones.
	PoolMax, PoolInUse, PoolIdle int64
	// PoolWaits counts acquisitions that had to wait for a connection;
	// PoolWaitTime is their total wait.
	PoolWaits    int64
	PoolWaitTime time.Duration

	// HasCache: the item cache fields are set (SQLite with
	// storage.sqlite.item_cache_mb > 0, PostgreSQL with
	// storage.postgres.read_cache_mb > 0).
	HasCache bool
	// CacheHits and CacheMisses count lookups; CacheBytes and
	// CacheEntries are the current content; CacheMaxBytes the bound.
	CacheHits, CacheMisses, CacheBytes, CacheEntries, CacheMaxBytes int64
	// CacheInUse: the cache answers reads now (SQLite: always; PostgreSQL:
	// while the server is alone on its database, ADR 0037).
	CacheInUse bool

	// Retries counts operations run again after a transient failure
	// (PostgreSQL), -1 when the backend does not retry.
	Retries int64

	// HasPipelining: the pipelining fields are set (PostgreSQL).
	HasPipelining bool
	// SpeculativeApplied counts writes applied in one round trip on their
	// guesses (ADR 0028); SpeculativeRefused those whose guess failed and
	// that ran again on the locked path.
	SpeculativeApplied, SpeculativeRefused int64
	// WriteBatches counts the batches the write lanes sent (ADR 0038) and
	// WriteBatchWrites the writes they carried.
	WriteBatches, WriteBatchWrites int64
	// ReadPipelines counts the pipelines the read lanes sent and
	// ReadPipelineGets the GetItems they answered.
	ReadPipelines, ReadPipelineGets int64

	// HasOutbox: the index outbox fields are set (Cassandra: global
	// secondary index changes are applied after their item's write).
	HasOutbox bool
	// OutboxPending is the number of index changes this process knows to
	// be committed with their item and not yet applied to the index;
	// OutboxOldest the age of the oldest of them (0 when none);
	// OutboxRecovered counts changes its background sweep applied (left
	// by a writer that died or failed).
	OutboxPending   int64
	OutboxOldest    time.Duration
	OutboxRecovered int64

	// HasBackground: BackgroundFailures is set (SQLite, PostgreSQL, MongoDB,
	// Cassandra).
	HasBackground bool
	// BackgroundFailures counts failed passes of the backend's background
	// work (SQLite: the purge of deleted tables; PostgreSQL: that purge,
	// the fold of the statistics deltas and its vacuum). Each is retried
	// at its next pass, so a count that keeps growing means work that
	// never gets done.
	BackgroundFailures int64
}

// StatsReporter is a backend's statistics (Capabilities.Stats). It is not
// part of Backend: metrics are optional, storage semantics are not.
type StatsReporter interface {
	Stats() Stats
}

// checkedStats is a StatsReporter under the Checked contract checks: no
// figure is negative (but Retries, -1 when the backend does not retry),
// and no pool lends out more connections than its bound. Figures are not
// answers a caller acts on, so a broken one is reported and still
// returned.
type checkedStats struct {
	c  *checked
	sr StatsReporter
}

func (cs checkedStats) Stats() Stats {
	s := cs.sr.Stats()
	neg := s.PoolMax < 0 || s.PoolInUse < 0 || s.PoolIdle < 0 || s.PoolWaits < 0 || s.PoolWaitTime < 0 ||
		s.CacheHits < 0 || s.CacheMisses < 0 || s.CacheBytes < 0 || s.CacheEntries < 0 || s.CacheMaxBytes < 0 ||
		s.Retries < -1 || s.SpeculativeApplied < 0 || s.SpeculativeRefused < 0 || s.WriteBatches < 0 ||
		s.WriteBatchWrites < 0 || s.ReadPipelines < 0 || s.ReadPipelineGets < 0 ||
		s.OutboxPending < 0 || s.OutboxOldest < 0 || s.OutboxRecovered < 0 || s.BackgroundFailures < 0
	switch {
	case neg:
		cs.c.violation("Stats", "a negative figure: %+v", s)
	case s.HasPool && s.PoolMax > 0 && s.PoolInUse > s.PoolMax:
		cs.c.violation("Stats", "%d connections in use for a pool of %d", s.PoolInUse, s.PoolMax)
	}
	return s
}
