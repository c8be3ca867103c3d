package mongodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/extenddb/extenddb/internal/backend"
)

// The backup and restore job catalogs (backend.BackupCatalog,
// backend.RestoreCatalog) on single-document atomicity (ADR 0017): one
// document per row {_id: ARN or job id, v: version, r: the record}. Every
// conditional write (status, heartbeat, claim) reads the row, checks its
// condition in Go and writes version v+1 by the same discipline as item
// writes: a unique insert for a new row, else the claim
// "<collection>/<_id>@<v>@<generation>" in jobclaims whose winner alone
// replaces {_id, v}. The "database clock" is the server process's clock
// (servers sharing a database must agree on time, as the leases assume).

var (
	_ backend.BackupCatalog  = (*Backend)(nil)
	_ backend.RestoreCatalog = (*Backend)(nil)
)

const (
	backupsColl   = "backups"
	restoresColl  = "restores"
	jobClaimsColl = "jobclaims"
	backupMeta    = "backupmeta"
)

func catalogNow() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

type rowDoc[T any] struct {
	ID string `bson:"_id"`
	V  int64  `bson:"v"`
	R  T      `bson:"r"`
}

func readRow[T any](ctx context.Context, coll *mongo.Collection, id string) (*rowDoc[T], error) {
	var d rowDoc[T]
	err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, translate(err, "mongodb: read "+coll.Name())
	}
	return &d, nil
}

// casRow writes r as version cur.V+1 of row id (del: deletes the row);
// false when the row moved on (the caller reads again). A deleted row's
// ARN is never inserted again, and a late claimant's write at version
// cur.V matches nothing.
func casRow[T any](ctx context.Context, b *Backend, coll *mongo.Collection, cur *rowDoc[T], r T, del bool) (bool, error) {
	claims := b.db.Collection(jobClaimsColl)
	for gen := 0; ; gen++ {
		cid := fmt.Sprintf("%s/%s@%016x@%d", coll.Name(), cur.ID, cur.V, gen)
		_, err := claims.InsertOne(ctx, claimDoc{ID: cid, Exp: time.Now().Add(b.lease).UnixMilli()})
		if isDup(err) {
			var held claimDoc
			err := claims.FindOne(ctx, bson.D{{Key: "_id", Value: cid}}).Decode(&held)
			if errors.Is(err, mongo.ErrNoDocuments) || (err == nil && held.Exp > time.Now().UnixMilli()) {
				return false, nil
			}
			if err != nil {
				return false, translate(err, "mongodb: read job claim")
			}
			continue // expired: the next generation
		}
		if err != nil {
			return false, translate(err, "mongodb: claim job row")
		}
		var matched int64
		if del {
			res, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: cur.ID}, {Key: "v", Value: cur.V}})
			if err != nil {
				return false, translate(err, "mongodb: delete job row")
			}
			matched = res.DeletedCount
		} else {
			res, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: cur.ID}, {Key: "v", Value: cur.V}}, rowDoc[T]{ID: cur.ID, V: cur.V + 1, R: r})
			if err != nil {
				return false, translate(err, "mongodb: write job row")
			}
			matched = res.MatchedCount
		}
		for g := 0; g <= gen; g++ {
			_, _ = claims.DeleteOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprintf("%s/%s@%016x@%d", coll.Name(), cur.ID, cur.V, g)}})
		}
		return matched == 1, nil
	}
}

// condWrite applies change to row id while cond holds, retrying lost
// races; it returns whether it matched and the row after it.
func condWrite[T any](ctx context.Context, b *Backend, coll *mongo.Collection, id string, cond func(T) bool, change func(*T)) (bool, *T, error) {
	return condWriteDel(ctx, b, coll, id, cond, change, false)
}

// condWriteDel is condWrite; del deletes the row instead (the row after
// it is then nil).
func condWriteDel[T any](ctx context.Context, b *Backend, coll *mongo.Collection, id string, cond func(T) bool, change func(*T), del bool) (bool, *T, error) {
	for attempt := 0; ; attempt++ {
		cur, err := readRow[T](ctx, coll, id)
		if err != nil {
			return false, nil, err
		}
		if cur == nil {
			return false, nil, nil
		}
		if !cond(cur.R) {
			return false, &cur.R, nil
		}
		r := cur.R
		if change != nil {
			change(&r)
		}
		ok, err := casRow(ctx, b, coll, cur, r, del)
		if err != nil {
			return false, nil, err
		}
		if ok && del {
			return true, nil, nil
		}
		if ok {
			return true, &r, nil
		}
		if err := backend.Backoff(ctx, attempt, retryCeiling); err != nil {
			return false, nil, translate(err, "mongodb: job row contended")
		}
	}
}

type backupRow struct {
	ARN        string    `bson:"arn"`
	Account    string    `bson:"account"`
	TableName  string    `bson:"table_name"`
	TableID    int64     `bson:"table_id"`
	BackupID   string    `bson:"backup_id"`
	Name       string    `bson:"name"`
	Type       string    `bson:"type"`
	Status     string    `bson:"status"`
	CreatedAt  time.Time `bson:"created_at"`
	SizeBytes  int64     `bson:"size_bytes"`
	ItemCount  int64     `bson:"item_count"`
	TableDesc  []byte    `bson:"table_desc"`
	StoreID    string    `bson:"store_id"`
	Prefix     string    `bson:"prefix"`
	Message    string    `bson:"message"`
	Owner      string    `bson:"owner"`
	Generation int64     `bson:"generation"`
	Heartbeat  time.Time `bson:"heartbeat"`
	// ExpiresMS is ExpiresAt in Unix milliseconds (0: never).
	ExpiresMS int64  `bson:"expires_ms"`
	Plan      string `bson:"plan"`
}

func (r backupRow) record() *backend.BackupRecord {
	desc := r.TableDesc
	if desc == nil {
		desc = []byte{}
	}
	return &backend.BackupRecord{ARN: r.ARN, Account: r.Account, TableName: r.TableName, TableID: r.TableID, BackupID: r.BackupID,
		Name: r.Name, Type: r.Type, Status: r.Status, CreatedAt: r.CreatedAt.UTC(), SizeBytes: r.SizeBytes, ItemCount: r.ItemCount,
		TableDesc: desc, StoreID: r.StoreID, Prefix: r.Prefix, Message: r.Message, Owner: r.Owner, Generation: r.Generation,
		Heartbeat: r.Heartbeat.UTC(), ExpiresAt: backend.ExpiryTime(r.ExpiresMS), Plan: r.Plan}
}

func backupRowOf(r backend.BackupRecord) backupRow {
	return backupRow{ARN: r.ARN, Account: r.Account, TableName: r.TableName, TableID: r.TableID, BackupID: r.BackupID,
		Name: r.Name, Type: r.Type, Status: r.Status, CreatedAt: r.CreatedAt.UTC().Truncate(time.Millisecond), SizeBytes: r.SizeBytes,
		ItemCount: r.ItemCount, TableDesc: nz(r.TableDesc), StoreID: r.StoreID, Prefix: r.Prefix, Message: r.Message, Owner: r.Owner,
		Generation: r.Generation, Heartbeat: r.Heartbeat.UTC(), ExpiresMS: backend.ExpiryMillis(r.ExpiresAt), Plan: r.Plan}
}

func backupResult(matched bool, r *backupRow) *backend.BackupWriteResult {
	res := &backend.BackupWriteResult{Matched: matched}
	if r != nil {
		res.Record = r.record()
	}
	return res
}

// CatalogID implements backend.BackupCatalog.
func (b *Backend) CatalogID(ctx context.Context, newID string) (string, error) {
	coll := b.db.Collection(backupMeta)
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "catalog"}, {Key: "id", Value: newID}})
	if err == nil {
		return newID, nil
	}
	if !isDup(err) {
		return "", translate(err, "mongodb: catalog id")
	}
	var d struct {
		ID string `bson:"id"`
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "catalog"}}).Decode(&d); err != nil {
		return "", translate(err, "mongodb: catalog id")
	}
	return d.ID, nil
}

// InsertBackup implements backend.BackupCatalog.
func (b *Backend) InsertBackup(ctx context.Context, p backend.InsertBackupParams) (*backend.BackupRecord, error) {
	r := backupRowOf(p.Record)
	r.Generation, r.Heartbeat = 1, catalogNow()
	_, err := b.db.Collection(backupsColl).InsertOne(ctx, rowDoc[backupRow]{ID: r.ARN, V: 1, R: r})
	if isDup(err) {
		return nil, backend.Errorf(backend.KindInternal, "mongodb: backup %s exists", r.ARN)
	}
	if err != nil {
		return nil, translate(err, "mongodb: insert backup")
	}
	return r.record(), nil
}

// GetBackup implements backend.BackupCatalog.
func (b *Backend) GetBackup(ctx context.Context, p backend.GetBackupParams) (*backend.BackupRecord, error) {
	d, err := readRow[backupRow](ctx, b.db.Collection(backupsColl), p.ARN)
	if err != nil || d == nil {
		return nil, err
	}
	return d.R.record(), nil
}

// ListBackups implements backend.BackupCatalog.
func (b *Backend) ListBackups(ctx context.Context, p backend.ListBackupsParams) ([]backend.BackupRecord, error) {
	filter := bson.D{}
	if p.StartAfter != "" {
		filter = bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: p.StartAfter}}}}
	}
	cur, err := b.db.Collection(backupsColl).Find(ctx, filter)
	if err != nil {
		return nil, translate(err, "mongodb: list backups")
	}
	var docs []rowDoc[backupRow]
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err, "mongodb: list backups")
	}
	var out []backend.BackupRecord
	for _, d := range docs {
		out = append(out, *d.R.record())
	}
	return backend.FilterBackups(out, p), nil
}

// UpdateBackup implements backend.BackupCatalog.
func (b *Backend) UpdateBackup(ctx context.Context, p backend.UpdateBackupParams) (*backend.BackupWriteResult, error) {
	ok, r, err := condWrite(ctx, b, b.db.Collection(backupsColl), p.ARN,
		func(r backupRow) bool { return r.Generation == p.Generation && r.Status == p.Status },
		func(r *backupRow) {
			r.Status, r.Heartbeat = p.NewStatus, catalogNow()
			if p.SizeBytes != nil {
				r.SizeBytes = *p.SizeBytes
			}
			if p.ItemCount != nil {
				r.ItemCount = *p.ItemCount
			}
			if p.Message != nil {
				r.Message = *p.Message
			}
			if p.StoreID != nil {
				r.StoreID = *p.StoreID
			}
		})
	if err != nil {
		return nil, err
	}
	return backupResult(ok, r), nil
}

// RemoveBackup implements backend.BackupCatalog.
func (b *Backend) RemoveBackup(ctx context.Context, p backend.RemoveBackupParams) (*backend.BackupWriteResult, error) {
	ok, r, err := condWriteDel(ctx, b, b.db.Collection(backupsColl), p.ARN,
		func(r backupRow) bool { return r.Generation == p.Generation && r.Status == p.Status }, nil, true)
	if err != nil {
		return nil, err
	}
	return backupResult(ok, r), nil
}

// HeartbeatBackup implements backend.BackupCatalog.
func (b *Backend) HeartbeatBackup(ctx context.Context, p backend.HeartbeatBackupParams) (*backend.BackupWriteResult, error) {
	ok, r, err := condWrite(ctx, b, b.db.Collection(backupsColl), p.ARN,
		func(r backupRow) bool { return r.Owner == p.Owner && r.Generation == p.Generation },
		func(r *backupRow) { r.Heartbeat = catalogNow() })
	if err != nil {
		return nil, err
	}
	return backupResult(ok, r), nil
}

// ClaimBackup implements backend.BackupCatalog.
func (b *Backend) ClaimBackup(ctx context.Context, p backend.ClaimBackupParams) (*backend.BackupWriteResult, error) {
	ok, r, err := condWrite(ctx, b, b.db.Collection(backupsColl), p.ARN,
		func(r backupRow) bool {
			return r.Generation == p.Generation && r.Status == p.Status && !r.Heartbeat.After(catalogNow().Add(-p.StaleAfter))
		},
		func(r *backupRow) {
			r.Owner, r.Generation, r.Heartbeat = p.Owner, r.Generation+1, catalogNow()
			if p.NewStatus != "" {
				r.Status = p.NewStatus
			}
		})
	if err != nil {
		return nil, err
	}
	return backupResult(ok, r), nil
}

type restoreRow struct {
	ID         string    `bson:"id"`
	Account    string    `bson:"account"`
	TableName  string    `bson:"table_name"`
	TableID    int64     `bson:"table_id"`
	BackupARN  string    `bson:"backup_arn"`
	Status     string    `bson:"status"`
	Message    string    `bson:"message"`
	Loaded     int64     `bson:"loaded"`
	Owner      string    `bson:"owner"`
	Generation int64     `bson:"generation"`
	Heartbeat  time.Time `bson:"heartbeat"`
}

func (r restoreRow) record() *backend.RestoreRecord {
	return &backend.RestoreRecord{ID: r.ID, Account: r.Account, TableName: r.TableName, TableID: r.TableID, BackupARN: r.BackupARN,
		Status: r.Status, Message: r.Message, Loaded: r.Loaded, Owner: r.Owner, Generation: r.Generation, Heartbeat: r.Heartbeat.UTC()}
}

func restoreResult(matched bool, r *restoreRow) *backend.RestoreWriteResult {
	res := &backend.RestoreWriteResult{Matched: matched}
	if r != nil {
		res.Record = r.record()
	}
	return res
}

// InsertRestore implements backend.RestoreCatalog.
func (b *Backend) InsertRestore(ctx context.Context, p backend.RestoreRecord) (*backend.RestoreRecord, error) {
	r := restoreRow{ID: p.ID, Account: p.Account, TableName: p.TableName, TableID: p.TableID, BackupARN: p.BackupARN,
		Status: backend.RestoreRunning, Message: p.Message, Owner: p.Owner, Generation: 1, Heartbeat: catalogNow()}
	_, err := b.db.Collection(restoresColl).InsertOne(ctx, rowDoc[restoreRow]{ID: r.ID, V: 1, R: r})
	if isDup(err) {
		return nil, backend.Errorf(backend.KindInternal, "mongodb: restore job %s exists", r.ID)
	}
	if err != nil {
		return nil, translate(err, "mongodb: insert restore job")
	}
	return r.record(), nil
}

// ListRestores implements backend.RestoreCatalog.
func (b *Backend) ListRestores(ctx context.Context, statuses []string) ([]backend.RestoreRecord, error) {
	cur, err := b.db.Collection(restoresColl).Find(ctx, bson.D{})
	if err != nil {
		return nil, translate(err, "mongodb: list restore jobs")
	}
	var docs []rowDoc[restoreRow]
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err, "mongodb: list restore jobs")
	}
	var out []backend.RestoreRecord
	for _, d := range docs {
		out = append(out, *d.R.record())
	}
	return backend.FilterRestores(out, statuses), nil
}

// UpdateRestore implements backend.RestoreCatalog.
func (b *Backend) UpdateRestore(ctx context.Context, p backend.UpdateBackupParams) (*backend.RestoreWriteResult, error) {
	ok, r, err := condWrite(ctx, b, b.db.Collection(restoresColl), p.ARN,
		func(r restoreRow) bool { return r.Generation == p.Generation && r.Status == p.Status },
		func(r *restoreRow) {
			r.Status, r.Heartbeat, r.Message = p.NewStatus, catalogNow(), ""
			if p.Message != nil {
				r.Message = *p.Message
			}
		})
	if err != nil {
		return nil, err
	}
	return restoreResult(ok, r), nil
}

// HeartbeatRestore implements backend.RestoreCatalog.
func (b *Backend) HeartbeatRestore(ctx context.Context, p backend.HeartbeatBackupParams) (*backend.RestoreWriteResult, error) {
	ok, r, err := condWrite(ctx, b, b.db.Collection(restoresColl), p.ARN,
		func(r restoreRow) bool { return r.Owner == p.Owner && r.Generation == p.Generation },
		func(r *restoreRow) { r.Heartbeat = catalogNow() })
	if err != nil {
		return nil, err
	}
	return restoreResult(ok, r), nil
}

// ClaimRestore implements backend.RestoreCatalog.
func (b *Backend) ClaimRestore(ctx context.Context, p backend.ClaimBackupParams) (*backend.RestoreWriteResult, error) {
	ok, r, err := condWrite(ctx, b, b.db.Collection(restoresColl), p.ARN,
		func(r restoreRow) bool {
			return r.Generation == p.Generation && r.Status == p.Status && !r.Heartbeat.After(catalogNow().Add(-p.StaleAfter))
		},
		func(r *restoreRow) {
			r.Owner, r.Generation, r.Heartbeat = p.Owner, r.Generation+1, catalogNow()
			if p.NewStatus != "" {
				r.Status = p.NewStatus
			}
		})
	if err != nil {
		return nil, err
	}
	return restoreResult(ok, r), nil
}

// RecordRestoreProgress implements backend.RestoreCatalog.
func (b *Backend) RecordRestoreProgress(ctx context.Context, p backend.RestoreProgressParams) (*backend.RestoreWriteResult, error) {
	ok, r, err := condWrite(ctx, b, b.db.Collection(restoresColl), p.ID,
		func(r restoreRow) bool {
			return r.Owner == p.Owner && r.Generation == p.Generation && r.Status == backend.RestoreRunning && r.Loaded <= p.Loaded
		},
		func(r *restoreRow) { r.Loaded = p.Loaded })
	if err != nil {
		return nil, err
	}
	return restoreResult(ok, r), nil
}
