package storage

// PerItemAtomicity is declared by backends whose only atomic write is one
// item's (MongoDB, Cassandra): their TransactWrite runs on the shared
// transaction ledger (ADR 0019), costs several round trips per item and
// must lock all its items within the ledger's lock timeout. A bulk loader
// that needs no atomicity across items (a restore into a table that no
// client can use until it is ACTIVE) writes such a backend item by item.
type PerItemAtomicity interface {
	PerItemAtomic()
}

// PerItemAtomic tells whether b declares PerItemAtomicity, looking
// through wrappers.
func PerItemAtomic(b Backend) bool {
	_, ok := Unwrap(b).(PerItemAtomicity)
	return ok
}
