package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/extenddb/extenddb/internal/backend"
)

// Shard lifecycle: rollover on a schedule, close at disable, settle (End
// recorded) after a close, retention trimming. Run by the background
// stream loop (streamLoop) and after UpdateTable.

// Defaults of the stream options.
const (
	defaultShardInterval   = 4 * time.Hour
	defaultStreamRetention = 24 * time.Hour
	// IteratorLifetime is how long a shard iterator may be used by
	// default (streams.iterator_lifetime).
	IteratorLifetime = 15 * time.Minute
)

func cloneStreams(in []streamState) []streamState {
	out := make([]streamState, len(in))
	for i, s := range in {
		out[i] = s
		out[i].Shards = append([]shardState(nil), s.Shards...)
	}
	return out
}

var errNothingToSettle = errors.New("engine: nothing to settle")

// settleShards records End on every closed shard of t that has none: the
// log's last Seq, read now, after the close committed (t was read after
// it), bounds every record tagged with the shard.
func (e *Engine) settleShards(ctx context.Context, t *table) error {
	open := map[int64]bool{}
	for _, s := range t.stored.Streams {
		for _, sh := range s.Shards {
			if sh.Closed != 0 && sh.End == 0 {
				open[sh.Gen] = true
			}
		}
	}
	if len(open) == 0 {
		return nil
	}
	last, err := e.logLast(ctx, t.ref)
	if err != nil {
		return err
	}
	_, err = e.editStreams(ctx, t.ref, func(st *storedTable) bool {
		changed := false
		for i := range st.Streams {
			for j := range st.Streams[i].Shards {
				sh := &st.Streams[i].Shards[j]
				if open[sh.Gen] && sh.Closed != 0 && sh.End == 0 {
					sh.End = max(last, sh.From)
					changed = true
				}
			}
		}
		return changed
	})
	return err
}

// rollover closes the open shard of t's enabled stream, when it is older
// than the shard interval, and opens its child.
func (e *Engine) rollover(ctx context.Context, t *table, force bool) error {
	if t.stream == nil {
		return nil
	}
	s := t.stored.Streams[len(t.stored.Streams)-1]
	cur := s.Shards[len(s.Shards)-1]
	now := e.now()
	if !force && now.Sub(time.UnixMilli(cur.Created)) < e.shardInterval {
		return nil
	}
	from, err := e.logLast(ctx, t.ref)
	if err != nil {
		return err
	}
	changed, err := e.editStreams(ctx, t.ref, func(st *storedTable) bool {
		n := len(st.Streams)
		if n == 0 || st.Streams[n-1].Ended != 0 {
			return false
		}
		ss := &st.Streams[n-1]
		last := &ss.Shards[len(ss.Shards)-1]
		if last.Gen != cur.Gen || last.Closed != 0 {
			return false
		}
		ms := now.UnixMilli()
		last.Closed = ms
		gen := st.nextGen()
		st.ShardGen = gen
		ss.Shards = append(ss.Shards, shardState{Gen: gen, Created: ms, From: max(from, last.From)})
		return true
	})
	if err != nil || !changed {
		return err
	}
	nt, err := e.currentTable(ctx, t.ref)
	if err != nil || nt == nil {
		return err
	}
	return e.settleShards(ctx, nt)
}

// trimStreams removes the table's records older than the retention
// period, forgets streams whose every record is gone, and reports the
// retention backlog.
func (e *Engine) trimStreams(ctx context.Context, t *table) error {
	if len(t.stored.Streams) == 0 && !t.pitr {
		return nil
	}
	cl, ok := e.changeLog()
	if !ok {
		return nil
	}
	// Record times are the backend's clock (LogRecord.At), so the
	// retention is measured on the real clock, not Options.Now.
	before := time.Now().Add(-e.retention)
	trimAt, trim, err := e.trimBound(ctx, t, before, len(t.stored.Streams) > 0)
	if err != nil {
		return err
	}
	if trim {
		if _, err := cl.TrimLog(ctx, backend.TrimLogParams{Table: t.ref, Before: trimAt}); err != nil {
			return err
		}
	}
	if len(t.stored.Streams) == 0 {
		return nil
	}
	info, err := cl.LogInfo(ctx, backend.LogInfoParams{Table: t.ref})
	if err != nil {
		return err
	}
	e.sm.backlog.WithLabelValues(t.ref.Account, t.ref.Name).Set(float64(info.Count))
	// A stream disabled longer ago than the retention period has no
	// records left: it is no longer listed.
	cut := before.UnixMilli()
	stale := false
	for _, s := range t.stored.Streams {
		if s.Ended != 0 && s.Ended < cut {
			stale = true
		}
	}
	if !stale {
		return nil
	}
	_, err = e.editStreams(ctx, t.ref, func(st *storedTable) bool {
		var keep []streamState
		for _, s := range st.Streams {
			if s.Ended == 0 || s.Ended >= cut {
				keep = append(keep, s)
			}
		}
		if len(keep) == len(st.Streams) {
			return false
		}
		st.Streams = keep
		return true
	})
	return err
}

// streamLoop rolls shards over, settles closed shards and trims the
// logs, every StreamCheckInterval.
func (e *Engine) streamLoop(ctx context.Context) {
	if _, ok := e.changeLog(); !ok {
		return
	}
	lastTrim := time.Time{}
	for {
		trim := time.Since(lastTrim) >= e.trimInterval
		if trim {
			lastTrim = time.Now()
		}
		e.forEachTable(ctx, func(t *table) {
			if ctx.Err() != nil {
				return
			}
			if len(t.stored.Streams) == 0 {
				if err := e.adoptStream(ctx, t); err != nil {
					e.log.Warn("stream adoption", "table", t.ref.Name, "err", err)
				}
				if trim && t.pitr {
					if err := e.trimStreams(ctx, t); err != nil && ctx.Err() == nil {
						e.log.Warn("change log trim", "table", t.ref.Name, "err", err)
					}
				}
				return
			}
			if err := e.settleShards(ctx, t); err != nil {
				e.log.Warn("stream shards", "table", t.ref.Name, "err", err)
			}
			if err := e.rollover(ctx, t, false); err != nil && ctx.Err() == nil {
				e.log.Warn("stream shard rollover", "table", t.ref.Name, "err", err)
			}
			if trim {
				if err := e.trimStreams(ctx, t); err != nil && ctx.Err() == nil {
					e.log.Warn("stream trim", "table", t.ref.Name, "err", err)
				}
			}
		})
		select {
		case <-ctx.Done():
			return
		case <-time.After(e.streamCheck):
		}
	}
}

// adoptStream gives a table whose description enables a stream but has no
// stream state (created by a version without streams) its stream: the
// label it already shows, one shard from the log's current end.
func (e *Engine) adoptStream(ctx context.Context, t *table) error {
	ss := t.stored.Desc.StreamSpecification
	if ss == nil || ss.StreamEnabled == nil || !*ss.StreamEnabled || t.stored.Desc.LatestStreamLabel == "" {
		return nil
	}
	from, err := e.logLast(ctx, t.ref)
	if err != nil {
		return err
	}
	now := e.now()
	_, err = e.editStreams(ctx, t.ref, func(st *storedTable) bool {
		if len(st.Streams) != 0 || st.Desc.StreamSpecification == nil {
			return false
		}
		label, arn := st.Desc.LatestStreamLabel, st.Desc.LatestStreamArn
		st.enableStream(st.Desc.StreamSpecification.StreamViewType, now, from)
		st.Streams[0].Label = label
		st.Desc.LatestStreamLabel, st.Desc.LatestStreamArn = label, arn
		return true
	})
	return err
}

// editStreams rewrites the stored description of table incarnation ref
// through edit, which changes a fresh copy of it (its streams cloned) and
// answers false when there is nothing to change. A table gone or created
// again meanwhile is not an error (changed false); the cached description
// is dropped either way.
func (e *Engine) editStreams(ctx context.Context, ref backend.TableRef, edit func(st *storedTable) bool) (changed bool, err error) {
	_, err = e.backend.UpdateTable(ctx, backend.UpdateTableParams{Account: ref.Account, Name: ref.Name, Fn: func(old *backend.Table) ([]byte, error) {
		if old.ID != ref.ID {
			return nil, errNothingToSettle
		}
		var st storedTable
		if err := json.Unmarshal(old.Desc, &st); err != nil {
			return nil, err
		}
		st.Streams = cloneStreams(st.Streams)
		if !edit(&st) {
			return nil, errNothingToSettle
		}
		return json.Marshal(&st)
	}})
	e.tables.drop(ref.Account, ref.Name)
	if err == errNothingToSettle || backend.IsKind(err, backend.KindTableNotFound) {
		return false, nil
	}
	return err == nil, err
}

// streamMetrics are the /metrics of DynamoDB Streams.
type streamMetrics struct {
	written prometheus.Counter
	read    prometheus.Counter
	backlog *prometheus.GaugeVec
}

func newStreamMetrics(reg prometheus.Registerer) *streamMetrics {
	m := &streamMetrics{
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "extenddb_stream_records_written_total",
			Help: "DynamoDB Streams records written (with their item writes)."}),
		read: prometheus.NewCounter(prometheus.CounterOpts{Name: "extenddb_stream_records_read_total",
			Help: "DynamoDB Streams records returned by GetRecords."}),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "extenddb_stream_retained_records",
			Help: "Records kept in a table's change log (the retention backlog), as of the last trim pass."}, []string{"account", "table"}),
	}
	if reg != nil {
		reg.MustRegister(m.written, m.read, m.backlog)
	}
	return m
}
