package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backup"
	"github.com/extenddb/extenddb/internal/engine"
	"github.com/extenddb/extenddb/internal/format"
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

// pitrWindow is the shipper and the backup jobs as the engine's PITR
// service.
type pitrWindow struct {
	s *backup.Shipper
	m *backup.Manager
}

func (w pitrWindow) RestoreToPointInTime(ctx context.Context, src engine.PITRHistory, at time.Time, account, name string,
	create func(ctx context.Context, job string) (*backend.Table, error)) error {
	prefix := src.Prefix
	if prefix == "" {
		prefix = format.PITRPrefix(src.Ref.Account, src.Ref.Name, backup.PITRTable{TableID: src.TableID, Since: src.Since}.Incarnation())
	}
	return w.m.RestorePITRUpTo(ctx, prefix, at, w.s.LastSegment(prefix), account, name, create)
}

func (w pitrWindow) StoredHistory(ctx context.Context, account, name, arn string) (*engine.StoredPITRHistory, error) {
	h, err := w.m.FindHistory(ctx, account, name, arn)
	if err != nil || h == nil {
		return nil, err
	}
	return &engine.StoredPITRHistory{Prefix: h.Prefix, Description: h.Head.SourceTable,
		Window: engine.PITRWindow{Earliest: h.Earliest, Latest: h.Latest}}, nil
}

func (w pitrWindow) Window(ctx context.Context, ref backend.TableRef, days int64) (engine.PITRWindow, error) {
	e, l, shipped := w.s.Window(ref, days)
	return engine.PITRWindow{Earliest: e, Latest: l, Shipped: shipped}, nil
}

// exportService joins the export jobs to the engine.
type exportService struct{ *backup.Exports }

func (exportService) HistoryPrefix(h engine.PITRHistory) string {
	if h.Prefix != "" {
		return h.Prefix
	}
	return format.PITRPrefix(h.Ref.Account, h.Ref.Name, backup.PITRTable{TableID: h.TableID, Since: h.Since}.Incarnation())
}

// importService is the engine's ImportService over the backup jobs (the
// ImportTableDescription crosses as JSON, the wire's shape).
type importService struct{ m *backup.Manager }

func (x importService) StartImport(ctx context.Context, account, table string, desc []byte, keyTypes map[string]string,
	create func(ctx context.Context, importID string) (*backend.Table, error)) ([]byte, error) {
	var d backup.ImportDescription
	if err := json.Unmarshal(desc, &d); err != nil {
		return nil, err
	}
	out, err := x.m.StartImport(ctx, backup.ImportRequest{Account: account, Table: table, Desc: d, KeyTypes: keyTypes, Create: create})
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}
