package engine

import (
	"errors"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// ItemLoader returns, for one stored table, a function that turns a
// canonical item into the storage write that puts it with every index
// entry the table's indexes (and TTL) call for: the encoded key and the
// Change. Code outside the engine that loads items (the restore job in
// internal/backup) declares the interface it needs and the server hands
// it the engine, so DynamoDB's index rules stay in one place and the
// loader never imports the engine (docs/architecture.md).
//
// The Change puts the item and its entries and deletes none: a restore
// writes into a new table, and re-applying the same item after a crash
// writes the same entries again. The writes are computed from st's
// description, so they must be fenced on it: write with st.Ref() and,
// on KindTableVersion, read the table again and make a new loader (ADR
// 0007).
func (e *Engine) ItemLoader(st *backend.Table) (func(item []byte) (pk, sk []byte, ch backend.Change, err error), error) {
	load, err := e.DecodedItemLoader(st)
	if err != nil {
		return nil, err
	}
	return func(raw []byte) ([]byte, []byte, backend.Change, error) {
		it, err := decodeStored(raw)
		if err != nil {
			return nil, nil, backend.Change{}, err
		}
		return load(it, raw)
	}, nil
}

// DecodedItemLoader is ItemLoader for a caller that holds the item
// decoded already (an import parses every line into an attr.Item): the
// function takes the item and raw, its canonical encoding
// (attr.AppendItem of it), and decodes nothing.
func (e *Engine) DecodedItemLoader(st *backend.Table) (func(it attr.Item, raw []byte) (pk, sk []byte, ch backend.Change, err error), error) {
	t, err := parseTable(st)
	if err != nil {
		return nil, err
	}
	return func(it attr.Item, raw []byte) ([]byte, []byte, backend.Change, error) {
		if it == nil {
			return nil, nil, backend.Change{}, errors.New("empty item")
		}
		pk, sk, err := t.itemKey(it)
		if err != nil {
			return nil, nil, backend.Change{}, err
		}
		entries, err := t.indexEntries(it, raw)
		if err != nil {
			return nil, nil, backend.Change{}, err
		}
		return pk, sk, backend.Change{Op: backend.Put, Item: raw, PutIndex: entries}, nil
	}, nil
}
