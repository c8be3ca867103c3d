package backend

// Capabilities is what a backend can do beyond the Backend methods. Each
// member is the backend's implementation of one optional capability, nil
// (false, 0) when the backend does not have it. A backend states its set
// in Backend.Capabilities; callers take a capability from there and never
// find one by a type assertion on a Backend, so that under Checked they
// get it checked: Checked wraps each member once, with the contract
// checks of its interface.
//
// A wrapper around a backend (a test's fault injection, a counting
// wrapper) states its own set: the inner backend's members would bypass
// it.
type Capabilities struct {
	// Snapshots reads one table as of one instant; backups are built on
	// it.
	Snapshots Snapshotter
	// Backups and Restores keep the backup and restore job catalogs; a
	// backend has both or neither.
	Backups  BackupCatalog
	Restores RestoreCatalog
	// Jobs keeps the rows of exports, imports and backup-plan runs
	// (ADR 0048).
	Jobs JobCatalog
	// ChangeLog keeps per-table change records; DynamoDB Streams are
	// built on it.
	ChangeLog ChangeLog
	// Bulk loads items into a table being restored (ADR 0032).
	Bulk BulkLoader
	// BulkBatchItems is the number of items the backend prefers per
	// BulkLoad call (0: no preference, the caller's default). A larger
	// call spreads its fixed costs (a round trip, the fence, a commit)
	// over more items and holds more memory while it is built and
	// written.
	BulkBatchItems int
	// PerItemAtomic is set by a backend whose only atomic write is one
	// item's (MongoDB, Cassandra): its TransactWrite runs on the shared
	// transaction ledger (ADR 0019), costs several round trips per item
	// and must lock all its items within the ledger's lock timeout. A
	// caller that needs no atomicity across items (a restore into a table
	// no client can use until it is ACTIVE, the TTL sweeper) writes such
	// a backend item by item.
	PerItemAtomic bool
	// Stats reports operational statistics for the metrics endpoint.
	Stats StatsReporter
	// Counts keeps every table's statistics with its writes (ADR 0053);
	// without it the engine computes them with TableStats.
	Counts TableCounter
}

// checkedCapabilities wraps each member of caps in its contract checks,
// reporting to c. A backend with one of the two job catalogs but not the
// other breaks the contract: the lone catalog is dropped, so the backend
// serves no backups rather than half of them.
func (c *checked) checkedCapabilities(caps Capabilities) Capabilities {
	out := Capabilities{BulkBatchItems: caps.BulkBatchItems, PerItemAtomic: caps.PerItemAtomic}
	if caps.BulkBatchItems < 0 {
		c.violation("Capabilities", "BulkBatchItems %d is negative", caps.BulkBatchItems)
		out.BulkBatchItems = 0
	}
	if caps.Snapshots != nil {
		out.Snapshots = &checkedSnapshots{c: c, se: caps.Snapshots}
	}
	if (caps.Backups == nil) != (caps.Restores == nil) {
		c.violation("Capabilities", "a backup catalog without a restore catalog, or the reverse (backups %v, restores %v)",
			caps.Backups != nil, caps.Restores != nil)
	} else if caps.Backups != nil {
		out.Backups = &checkedBackups{c: c, bc: caps.Backups}
		out.Restores = &checkedRestores{c: c, rc: caps.Restores}
	}
	if caps.Jobs != nil {
		out.Jobs = &checkedJobs{c: c, jc: caps.Jobs}
	}
	if caps.ChangeLog != nil {
		out.ChangeLog = &checkedLog{c: c, cl: caps.ChangeLog}
	}
	if caps.Bulk != nil {
		out.Bulk = checkedBulk{c: c, bl: caps.Bulk}
	}
	if caps.Stats != nil {
		out.Stats = checkedStats{c: c, sr: caps.Stats}
	}
	if caps.Counts != nil {
		out.Counts = checkedCounts{c: c, tc: caps.Counts}
	}
	return out
}

// Capabilities implements Backend: the backend's capabilities, each under
// its contract checks (wrapped once, by Checked).
func (c *checked) Capabilities() Capabilities { return c.caps }
