package engine

import (
	"bytes"
	"math"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// Consumed capacity, as DynamoDB reports it: CapacityUnits is the total of
// the table's units and every secondary index's; with
// ReturnConsumedCapacity INDEXES the response breaks it down into Table,
// GlobalSecondaryIndexes and LocalSecondaryIndexes. Transactions also
// split the units into ReadCapacityUnits or WriteCapacityUnits (single-item
// operations, Query, Scan and batches report CapacityUnits alone).
//
// A write costs an index (developer guide, "Provisioned throughput
// considerations for Global Secondary Indexes"; the same holds for local
// ones): one write of the new entry's size when the item enters the index,
// one of the old entry's size when it leaves it, both when the index key
// changes, one of the new entry's size when only projected attributes
// change, nothing when the entry stays as it was or the item is in the
// index neither before nor after.

type capSplit uint8

const (
	splitNone capSplit = iota
	splitRead
	splitWrite
)

// consumed accumulates the units an operation consumed on one table.
type consumed struct {
	table    float64
	gsi, lsi map[string]float64
}

func (c *consumed) addIndex(ix *index, units float64) {
	if units == 0 {
		return
	}
	m := &c.lsi
	if ix.Global {
		m = &c.gsi
	}
	if *m == nil {
		*m = map[string]float64{}
	}
	(*m)[ix.Name] += units
}

// addIndexWrites adds what replacing old by new (either may be nil) costs
// the table's secondary indexes, times factor (2 in transactions).
func (c *consumed) addIndexWrites(t *table, old, new attr.Item, factor float64) {
	for _, ix := range t.indexes {
		if ix.ttl {
			continue
		}
		var opk, osk, npk, nsk, oraw, nraw []byte
		var oin, nin bool
		if old != nil {
			if pk, sk, ok, err := ix.keyOf(old); err == nil && ok {
				opk, osk, oin = pk, sk, true
				oraw = ix.project(t, old, nil)
			}
		}
		if new != nil {
			if pk, sk, ok, err := ix.keyOf(new); err == nil && ok {
				npk, nsk, nin = pk, sk, true
				nraw = ix.project(t, new, nil)
			}
		}
		var u float64
		switch {
		case oin && nin:
			if !bytes.Equal(opk, npk) || !bytes.Equal(osk, nsk) {
				u = writeUnits(int(statsSize(oraw))) + writeUnits(int(statsSize(nraw)))
			} else if !bytes.Equal(oraw, nraw) {
				u = writeUnits(int(statsSize(nraw)))
			}
		case oin:
			u = writeUnits(int(statsSize(oraw)))
		case nin:
			u = writeUnits(int(statsSize(nraw)))
		}
		c.addIndex(ix, factor*u)
	}
}

// report builds the ConsumedCapacity of one table for the requested mode,
// or nil for NONE.
func (c consumed) report(mode, tableName string, split capSplit) *ConsumedCapacity {
	if mode == "" || mode == "NONE" {
		return nil
	}
	total := c.table
	for _, u := range sortedUnits(c.gsi) {
		total += u
	}
	for _, u := range sortedUnits(c.lsi) {
		total += u
	}
	out := &ConsumedCapacity{TableName: tableName, CapacityUnits: total}
	out.ReadCapacityUnits, out.WriteCapacityUnits = splitUnits(total, split)
	if mode != "INDEXES" {
		return out
	}
	capOf := func(u float64) Capacity {
		r, w := splitUnits(u, split)
		return Capacity{CapacityUnits: u, ReadCapacityUnits: r, WriteCapacityUnits: w}
	}
	tc := capOf(c.table)
	out.Table = &tc
	if len(c.gsi) > 0 {
		out.GlobalSecondaryIndexes = map[string]Capacity{}
		for n, u := range c.gsi {
			out.GlobalSecondaryIndexes[n] = capOf(u)
		}
	}
	if len(c.lsi) > 0 {
		out.LocalSecondaryIndexes = map[string]Capacity{}
		for n, u := range c.lsi {
			out.LocalSecondaryIndexes[n] = capOf(u)
		}
	}
	return out
}

func splitUnits(u float64, split capSplit) (r, w *float64) {
	switch split {
	case splitRead:
		return &u, nil
	case splitWrite:
		return nil, &u
	}
	return nil, nil
}

// sortedUnits lists a map's values in name order, so that float sums do
// not depend on map iteration order.
func sortedUnits(m map[string]float64) []float64 {
	names := sortedNames(m)
	out := make([]float64, len(names))
	for i, n := range names {
		out[i] = m[n]
	}
	return out
}

// wantsCapacity reports whether a ReturnConsumedCapacity mode asks for it.
func wantsCapacity(mode string) bool { return mode != "" && mode != "NONE" }

// addWrite adds what one applied write cost the table's secondary
// indexes, from the backend's result (the old item and the change).
func (c *consumed) addWrite(t *table, r *backend.WriteItemResult, factor float64) error {
	if len(t.indexes) == 0 || r == nil {
		return nil
	}
	old, err := decodeStored(r.Old)
	if err != nil {
		return err
	}
	var n attr.Item
	switch r.Change.Op {
	case backend.Put:
		if n, err = decodeStored(r.Change.Item); err != nil {
			return err
		}
	case backend.Delete:
	default:
		return nil
	}
	c.addIndexWrites(t, old, n, factor)
	return nil
}

// capacity returns the ConsumedCapacity to report, or nil.
func capacity(mode, table string, units float64, write bool) *ConsumedCapacity {
	return consumed{table: units}.report(mode, table, splitNone)
}

// writeCapacity reports a single-item write: on the table, the units of
// the larger of the item before and after the write (newSize; 0 for a
// delete), plus what the write cost its secondary indexes.
func writeCapacity(mode string, t *table, newSize int, res *backend.WriteItemResult) (*ConsumedCapacity, error) {
	if !wantsCapacity(mode) {
		return nil, nil
	}
	c := consumed{table: writeUnits(max(newSize, oldSize(res)))}
	if err := c.addWrite(t, res, 1); err != nil {
		return nil, err
	}
	return c.report(mode, t.name(), splitNone), nil
}

// oldSize is the item size of a write's old item, 0 when absent.
func oldSize(res *backend.WriteItemResult) int {
	if res == nil || res.Old == nil {
		return 0
	}
	return int(statsSize(res.Old))
}

func writeUnits(size int) float64 {
	u := math.Ceil(float64(size) / 1024)
	if u < 1 {
		u = 1
	}
	return u
}

func readUnits(size int, consistent bool) float64 {
	u := math.Ceil(float64(size) / 4096)
	if u < 1 {
		u = 1
	}
	if !consistent {
		u /= 2
	}
	return u
}

// ItemSize is the DynamoDB size of a stored item or index entry, the
// measure of the table statistics: the server opens its backend with it
// (backend.DriverEnv.ItemSize), so the figures a backend keeps with its
// writes are the ones DescribeTable reports.
func ItemSize(raw []byte) int64 { return statsSize(raw) }

// statsSize is what one stored item or index entry counts: its DynamoDB
// item size.
func statsSize(raw []byte) int64 {
	if n, err := attr.RawItemSize(raw); err == nil {
		return int64(n)
	}
	it, err := attr.DecodeItem(raw)
	if err != nil {
		return int64(len(raw))
	}
	return int64(attr.ItemSize(it))
}
