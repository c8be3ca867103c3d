package engine

import (
	"errors"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// Key size limits of DynamoDB.
const (
	maxHashKeySize  = 2048
	maxRangeKeySize = 1024
)

// keyBytes validates one key attribute of an item and encodes it.
func keyBytes(v attr.Value, ok bool, ka keyAttr, isRange bool) ([]byte, error) {
	if !ok {
		return nil, invalidParam("Missing the key %s in the item", ka.Name)
	}
	if v.Type != ka.Type {
		return nil, invalidParam("Type mismatch for key %s expected: %s actual: %s", ka.Name, ka.Type, v.Type)
	}
	if err := checkKeyValue(v, ka, isRange); err != nil {
		return nil, err
	}
	b, _ := attr.KeyBytes(v)
	return b, nil
}

func checkKeyValue(v attr.Value, ka keyAttr, isRange bool) error {
	switch v.Type {
	case attr.S:
		if v.Str == "" {
			return validationf("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: %s", ka.Name)
		}
	case attr.B:
		if len(v.Bin) == 0 {
			return validationf("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty binary value. Key: %s", ka.Name)
		}
	}
	size := attr.KeySize(v)
	if isRange {
		if size > maxRangeKeySize {
			return invalidParam("Aggregated size of all range keys has exceeded the size limit of 1024 bytes")
		}
	} else if size > maxHashKeySize {
		return invalidParam("Size of hashkey has exceeded the maximum size limit of2048 bytes")
	}
	return nil
}

// itemKey extracts and validates the primary key of a full item.
func (t *table) itemKey(it attr.Item) (pk, sk []byte, err error) {
	v, ok := it[t.Hash.Name]
	if pk, err = keyBytes(v, ok, t.Hash, false); err != nil {
		return nil, nil, err
	}
	if t.Range != nil {
		v, ok := it[t.Range.Name]
		if sk, err = keyBytes(v, ok, *t.Range, true); err != nil {
			return nil, nil, err
		}
	}
	return pk, sk, nil
}

var errKeySchema = validationf("The provided key element does not match the schema")

// keyParam validates a Key request member: exactly the table's key
// attributes with their types.
func (t *table) keyParam(key attr.Item) (pk, sk []byte, err error) {
	want := 1
	if t.Range != nil {
		want = 2
	}
	if len(key) != want {
		return nil, nil, errKeySchema
	}
	hv, ok := key[t.Hash.Name]
	if !ok || hv.Type != t.Hash.Type {
		return nil, nil, errKeySchema
	}
	if err := checkKeyValue(hv, t.Hash, false); err != nil {
		return nil, nil, err
	}
	pk, _ = attr.KeyBytes(hv)
	if t.Range != nil {
		rv, ok := key[t.Range.Name]
		if !ok || rv.Type != t.Range.Type {
			return nil, nil, errKeySchema
		}
		if err := checkKeyValue(rv, *t.Range, true); err != nil {
			return nil, nil, err
		}
		sk, _ = attr.KeyBytes(rv)
	}
	return pk, sk, nil
}

// keyItem returns the key attributes of an item.
func (t *table) keyItem(it attr.Item) attr.Item {
	k := attr.Item{t.Hash.Name: it[t.Hash.Name]}
	if t.Range != nil {
		k[t.Range.Name] = it[t.Range.Name]
	}
	return k
}

// indexKeyOf computes an item's key in an index; ok is false when the
// item lacks an index key attribute (it is then absent from the index).
// A present index key attribute of the wrong type is an error.
func (ix *index) keyOf(it attr.Item) (pk, sk []byte, ok bool, err error) {
	if ix.ttl {
		v, ok := it[ix.Hash.Name]
		if !ok || v.Type != attr.N {
			return nil, nil, false, nil
		}
		sk, _ = attr.KeyBytes(v)
		return ttlPartition, sk, true, nil
	}
	hv, hok := it[ix.Hash.Name]
	var rv attr.Value
	rok := true
	if ix.Range != nil {
		rv, rok = it[ix.Range.Name]
	}
	if hok {
		if err := ix.checkKey(hv, ix.Hash); err != nil {
			return nil, nil, false, err
		}
	}
	if ix.Range != nil && rok {
		if err := ix.checkKey(rv, *ix.Range); err != nil {
			return nil, nil, false, err
		}
	}
	if !hok || !rok {
		return nil, nil, false, nil
	}
	pk, _ = attr.KeyBytes(hv)
	if ix.Range != nil {
		sk, _ = attr.KeyBytes(rv)
	}
	return pk, sk, true, nil
}

func (ix *index) checkKey(v attr.Value, ka keyAttr) error {
	if v.Type != ka.Type {
		return invalidParam("Type mismatch for Index Key %s Expected: %s Actual: %s IndexName: %s", ka.Name, ka.Type, v.Type, ix.Name)
	}
	if (v.Type == attr.S && v.Str == "") || (v.Type == attr.B && len(v.Bin) == 0) {
		return validationf("One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty %s value. IndexName: %s, IndexKey: %s",
			map[attr.Type]string{attr.S: "string", attr.B: "binary"}[v.Type], ix.Name, ka.Name)
	}
	return nil
}

// project returns the item as the index stores it.
func (ix *index) project(t *table, it attr.Item, raw []byte) []byte {
	if ix.ProjType == "ALL" || ix.ProjType == "" {
		if raw != nil {
			return raw
		}
		return attr.EncodeItem(it)
	}
	out := t.keyItem(it)
	if ix.ttl {
		return attr.EncodeItem(out)
	}
	out[ix.Hash.Name] = it[ix.Hash.Name]
	if ix.Range != nil {
		out[ix.Range.Name] = it[ix.Range.Name]
	}
	for n := range ix.Include {
		if v, ok := it[n]; ok {
			out[n] = v
		}
	}
	return attr.EncodeItem(out)
}

// indexKeys returns the index keys of an item (for removal).
func (t *table) indexKeys(it attr.Item) []backend.IndexKey {
	if (len(t.indexes) == 0 && t.ttl == nil) || it == nil {
		return nil
	}
	var out []backend.IndexKey
	for _, ix := range t.allIndexes() {
		pk, sk, ok, err := ix.keyOf(it)
		if err != nil || !ok {
			continue
		}
		out = append(out, backend.IndexKey{Index: ix.Name, PK: pk, SK: sk})
	}
	return out
}

// indexEntries validates an item's index keys and returns its entries.
func (t *table) indexEntries(it attr.Item, raw []byte) ([]backend.IndexEntry, error) {
	if len(t.indexes) == 0 && t.ttl == nil {
		return nil, nil
	}
	var out []backend.IndexEntry
	for _, ix := range t.allIndexes() {
		pk, sk, ok, err := ix.keyOf(it)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		out = append(out, backend.IndexEntry{IndexKey: backend.IndexKey{Index: ix.Name, PK: pk, SK: sk}, Item: ix.project(t, it, raw)})
	}
	return out, nil
}

// putChange builds the storage change that writes newItem over old.
func (t *table) putChange(old attr.Item, newItem attr.Item, raw []byte) (backend.Change, error) {
	entries, err := t.indexEntries(newItem, raw)
	if err != nil {
		return backend.Change{}, err
	}
	return backend.Change{Op: backend.Put, Item: raw, DeleteIndex: t.indexKeys(old), PutIndex: entries}, nil
}

// deleteChange builds the storage change that removes old.
func (t *table) deleteChange(old attr.Item) backend.Change {
	return backend.Change{Op: backend.Delete, DeleteIndex: t.indexKeys(old)}
}

// hasIndexes reports whether writes maintain any index entries.
func (t *table) hasIndexes() bool { return len(t.indexes) > 0 || t.ttl != nil }

// ttlPartition is the single partition of the internal TTL index.
var ttlPartition = []byte{0}

// decodeStored decodes an item the backend returned.
func decodeStored(b []byte) (attr.Item, error) {
	if b == nil {
		return nil, nil
	}
	it, err := attr.DecodeItem(b)
	if err != nil {
		return nil, errors.New("stored item is not valid DynamoDB-JSON: " + err.Error())
	}
	return it, nil
}
