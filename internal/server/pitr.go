package server

import (
	"context"
	"encoding/hex"
	"encoding/json"

	"github.com/extenddb/extenddb/internal/backup"
	"github.com/extenddb/extenddb/internal/engine"
	"github.com/extenddb/extenddb/internal/format"
	"github.com/extenddb/extenddb/internal/storage"
)

// pitrSource is the engine as point-in-time recovery shipping needs it
// (backup.PITRSource; internal/backup never imports the engine).
type pitrSource struct{ eng *engine.Engine }

func (p pitrSource) PITRTables(ctx context.Context) ([]backup.PITRTable, error) {
	ts, err := p.eng.PITRTables(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]backup.PITRTable, len(ts))
	for i, t := range ts {
		out[i] = backup.PITRTable{Ref: t.Ref, TableID: t.TableID, TableArn: t.TableArn, Days: t.Days, Since: t.Since,
			Description: json.RawMessage(t.Description)}
	}
	return out, nil
}

func (p pitrSource) PITRRecord(data []byte) (format.PITRRecord, error) {
	f, err := p.eng.PITRRecord(data)
	if err != nil {
		return format.PITRRecord{}, err
	}
	r := format.PITRRecord{Event: f.Event, Keys: f.Keys, Time: format.PITRTime(f.Time), TxnCount: f.TxnCount, Hidden: f.Hidden, Service: f.Service}
	if f.NewImage != nil {
		r.NewImage = f.NewImage
	}
	if f.OldImage != nil {
		r.OldImage = f.OldImage
	}
	if f.Txn != nil {
		r.Txn = hex.EncodeToString(f.Txn)
	}
	return r, nil
}

// pitrWindow is the shipper as the engine's PITR service.
type pitrWindow struct{ s *backup.Shipper }

func (w pitrWindow) Window(ctx context.Context, ref storage.TableRef, days int64) (engine.PITRWindow, error) {
	e, l, shipped := w.s.Window(ref, days)
	return engine.PITRWindow{Earliest: e, Latest: l, Shipped: shipped}, nil
}
