// Package backup holds the backup and restore jobs, their claims, the
// reconciler and sync (docs/backup-design.md section 4). It joins the
// storage snapshot capability, the blob store and the backup format, and
// never imports the engine or the wire (internal/archtest enforces it):
// what it needs of DynamoDB's rules it declares here as interfaces that the
// server fills with the engine.
package backup

import (
	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// Indexer gives the restore job, for a target table, the function that
// turns one canonical item of a backup into the storage write that puts
// it with every index entry the table calls for: the encoded key and the
// Change to apply with backend.Backend.WriteItem (or a bulk load). The
// engine satisfies it (engine.Engine.ItemLoader), wired by
// internal/server, so index rules live in one place.
type Indexer interface {
	ItemLoader(t *backend.Table) (func(item []byte) (pk, sk []byte, ch backend.Change, err error), error)
}

// DecodedIndexer is an Indexer that also takes items already decoded:
// the function gets the item and raw, its canonical encoding, and
// decodes nothing (engine.Engine.DecodedItemLoader). Imports, which parse
// every line into an attr.Item, use it when the Restorer has it.
type DecodedIndexer interface {
	DecodedItemLoader(t *backend.Table) (func(it attr.Item, raw []byte) (pk, sk []byte, ch backend.Change, err error), error)
}
