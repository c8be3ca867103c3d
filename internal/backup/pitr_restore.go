package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/format"
	"github.com/extenddb/extenddb/internal/store"
)

// ErrRestoreTime: no state of the history can be restored at the asked
// instant (before its first base).
var ErrRestoreTime = errors.New("pitr: the instant is outside the restorable window")

// PITRPlan is a restore of a history to an instant, verified: the base
// to load and the records to replay after it (docs/backup-design.md
// section 7, "The cut").
type PITRPlan struct {
	Prefix string
	Head   format.PITRHead
	Base   format.PITRBase
	// Backup is the base, opened and verified (every data file).
	Backup *format.Backup
	// Records are the changes after the base's position up to the cut,
	// in Seq order, hidden records left out.
	Records []format.PITRRecord
	// Cut is the last Seq the restore includes.
	Cut int64
}

// mappedSource reads a base, whose files the backup names under its ARN's
// prefix, from where the history keeps them.
type mappedSource struct {
	src      StoreSource
	from, to string
}

func (s mappedSource) key(k string) string {
	if rest, ok := strings.CutPrefix(k, s.from); ok {
		return s.to + rest
	}
	return k
}

func (s mappedSource) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.src.Open(ctx, s.key(key))
}

func (s mappedSource) Size(ctx context.Context, key string) (int64, error) {
	return s.src.Size(ctx, s.key(key))
}

// PlanPITRRestore picks the newest base taken at or before at, verifies
// it and every segment of the history (hash, chain, ranges: a damaged or
// missing object fails naming it, before anything is written), and cuts
// the log: the records with At <= at, shortened so that every
// transaction in it is whole.
func PlanPITRRestore(ctx context.Context, st store.Store, prefix string, at time.Time) (*PITRPlan, error) {
	hb, err := readObject(ctx, st, format.PITRHeadKey(prefix))
	if err != nil {
		return nil, err
	}
	var head pitrHead
	if err := json.Unmarshal(hb, &head); err != nil {
		return nil, fmt.Errorf("%s: %w", format.PITRHeadKey(prefix), err)
	}
	bases, err := listBases(ctx, st, prefix)
	if err != nil {
		return nil, err
	}
	var base *format.PITRBase
	var baseAt time.Time
	for i := range bases {
		t, err := format.ParsePITRTime(bases[i].SnapshotAt)
		if err != nil {
			return nil, fmt.Errorf("%s: bad snapshot_at", format.BaseKey(prefix, bases[i].BackupID))
		}
		if !t.After(at) && (base == nil || t.After(baseAt)) {
			base, baseAt = &bases[i], t
		}
	}
	if base == nil {
		return nil, fmt.Errorf("%w: no base of %s at or before %s", ErrRestoreTime, prefix, format.PITRTime(at))
	}
	src := mappedSource{src: StoreSource{st}, from: format.Prefix(head.Account, head.TableName, base.BackupID),
		to: format.BasesPrefix(prefix) + "/" + base.BackupID + "/"}
	b, err := format.Open(ctx, src, src.from)
	if err != nil {
		return nil, err
	}
	if err := b.Verify(ctx); err != nil {
		return nil, err
	}
	// Every record up to the instant, for the transaction counts (a
	// transaction may straddle the base's position): the longest prefix
	// of the log whose writes were decided at or before the instant (a
	// backend may make records readable later than their commit, so the
	// log's At would cut late).
	var upto []format.PITRRecord
	if err := ReadHistory(ctx, st, prefix, func(recs []format.PITRRecord) error {
		for _, r := range recs {
			ts := r.Time
			if ts == "" {
				ts = r.At
			}
			t, err := format.ParsePITRTime(ts)
			if err != nil {
				return fmt.Errorf("%w: record %d: bad Time", format.ErrSegment, r.Seq)
			}
			if t.After(at) {
				return errStopHistory
			}
			upto = append(upto, r)
		}
		return nil
	}); err != nil && !errors.Is(err, errStopHistory) {
		return nil, err
	}
	upto = cutWhole(upto)
	plan := &PITRPlan{Prefix: prefix, Head: head.PITRHead, Base: *base, Backup: b, Cut: max(base.Position, head.Start)}
	for _, r := range upto {
		plan.Cut = max(plan.Cut, r.Seq)
		if r.Seq > base.Position && !r.Hidden {
			plan.Records = append(plan.Records, r)
		}
	}
	return plan, nil
}

var errStopHistory = errors.New("stop")

// cutWhole shortens a log prefix until every transaction in it has all
// its records: the cut moves back to before the first record of a
// transaction found incomplete, which may make another incomplete, so it
// repeats until none is.
func cutWhole(recs []format.PITRRecord) []format.PITRRecord {
	for {
		count := map[string]int{}
		first := map[string]int{}
		for i, r := range recs {
			if r.Txn == "" {
				continue
			}
			if _, ok := first[r.Txn]; !ok {
				first[r.Txn] = i
			}
			count[r.Txn]++
		}
		cut := len(recs)
		for _, r := range recs {
			if r.Txn != "" && count[r.Txn] < r.TxnCount && first[r.Txn] < cut {
				cut = first[r.Txn]
			}
		}
		if cut == len(recs) {
			return recs
		}
		recs = recs[:cut]
	}
}
