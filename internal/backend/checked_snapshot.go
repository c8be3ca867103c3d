package backend

import (
	"bytes"
	"context"
)

// checkedSnapshots is a snapshot capability under the Checked contract
// checks. OpenTableSnapshot answers only KindTableNotFound and
// KindLimitExceeded (besides KindInternal and KindUnavailable), and an
// open snapshot is whole: the table asked for, an instant, a descriptor
// kind and a stream. Each page the stream fetches holds at most the page
// size of rows strictly after the cursor in key order when the snapshot
// claims KeyOrder, each row with a partition key, an item and base keys
// equal to its keys; a fetch answers only KindSnapshotExpired and
// KindTableNotFound.
type checkedSnapshots struct {
	c  *checked
	se Snapshotter
}

var (
	kindsOpenSnapshot  = []Kind{KindTableNotFound, KindLimitExceeded}
	kindsSnapshotFetch = []Kind{KindSnapshotExpired, KindTableNotFound}
)

func (s *checkedSnapshots) OpenTableSnapshot(ctx context.Context, p OpenSnapshotParams) (*TableSnapshot, error) {
	snap, err := s.se.OpenTableSnapshot(ctx, p)
	if err != nil {
		return nil, s.c.checkErr("OpenTableSnapshot", err, kindsOpenSnapshot, nil)
	}
	if verr := s.checkSnapshot(p, snap); verr != nil {
		if snap != nil && snap.Items != nil {
			_ = snap.Items.Close()
		}
		return nil, verr
	}
	fetch := snap.Items.fetch
	keyOrder := snap.KeyOrder
	snap.Items.fetch = func(ctx context.Context, after *Cursor, limit int) ([]Row, bool, error) {
		rows, more, err := fetch(ctx, after, limit)
		if err != nil {
			return nil, false, s.c.checkErr("SnapshotStream.Next", err, kindsSnapshotFetch, nil)
		}
		if verr := s.checkPage(rows, after, limit, keyOrder); verr != nil {
			return nil, false, verr
		}
		return rows, more, nil
	}
	return snap, nil
}

// checkSnapshot checks an open snapshot's own coherence.
func (s *checkedSnapshots) checkSnapshot(p OpenSnapshotParams, snap *TableSnapshot) error {
	const m = "OpenTableSnapshot"
	switch {
	case snap == nil || snap.Table == nil || snap.Items == nil:
		return s.c.violation(m, "answered a snapshot without a table or a stream")
	case snap.Table.Account != p.Account || snap.Table.Name != p.Name:
		return s.c.violation(m, "asked for table %s/%s, answered %s/%s", p.Account, p.Name, snap.Table.Account, snap.Table.Name)
	case snap.At.IsZero():
		return s.c.violation(m, "answered a snapshot without an instant")
	case snap.Descriptor.Kind == "":
		return s.c.violation(m, "answered a snapshot without a descriptor kind")
	}
	return nil
}

// checkPage checks one page a snapshot stream fetched.
func (s *checkedSnapshots) checkPage(rows []Row, after *Cursor, limit int, keyOrder bool) error {
	const m = "SnapshotStream.Next"
	if limit > 0 && len(rows) > limit {
		return s.c.violation(m, "%d rows for a page of %d", len(rows), limit)
	}
	var prevPK, prevSK []byte
	have := after != nil
	if have {
		prevPK, prevSK = after.PK, after.SK
	}
	for _, r := range rows {
		if len(r.PK) == 0 || len(r.Item) == 0 {
			return s.c.violation(m, "a row without a partition key or an item: %x/%x", r.PK, r.SK)
		}
		if !bytes.Equal(r.BasePK, r.PK) || !bytes.Equal(r.BaseSK, r.SK) {
			return s.c.violation(m, "row %x/%x: base keys %x/%x differ", r.PK, r.SK, r.BasePK, r.BaseSK)
		}
		if keyOrder {
			if have && keyCompare(prevPK, prevSK, r.PK, r.SK) >= 0 {
				return s.c.violation(m, "the snapshot claims key order but %x/%x follows %x/%x", r.PK, r.SK, prevPK, prevSK)
			}
			prevPK, prevSK, have = r.PK, r.SK, true
		}
	}
	return nil
}

// keyCompare orders (pk, sk) pairs by partition key, then sort key.
func keyCompare(aPK, aSK, bPK, bSK []byte) int {
	if c := bytes.Compare(aPK, bPK); c != 0 {
		return c
	}
	return bytes.Compare(aSK, bSK)
}
