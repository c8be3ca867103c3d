// Package snapepoch is the bookkeeping shared by backends that give the
// snapshot capability without a snapshot read (MongoDB, ADR 0017;
// Cassandra, ADR 0021): while a snapshot epoch is open on a table, the
// first write of an item after the epoch's instant keeps the item's
// pre-image for it, and the snapshot reader shows, per item, the
// pre-image of its epoch when there is one (an "absent" pre-image: the
// item was created after the instant) and otherwise the stored item
// (unchanged since the instant).
//
// How a backend fences writers around the instant and where it keeps
// pre-images are its own (a catalog claim on MongoDB, a per-partition
// LWT fence on Cassandra); the epochs' lifetimes and the reader's choice
// are the same and live here.
package snapepoch

import (
	"cmp"
	"slices"
	"time"
)

// Open returns the epochs a writer must keep pre-images for: those whose
// expiry, plus grace, is after now (the grace covers clock skew between
// whoever judges expiry, so a reader whose epoch has not expired for it
// never misses a pre-image). Sorted ascending.
func Open[E cmp.Ordered](epochs map[E]time.Time, now time.Time, grace time.Duration) []E {
	var out []E
	for e, exp := range epochs {
		if exp.Add(grace).After(now) {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

// Expired returns the epochs that Open leaves out: their holder died or
// forgot to close them; they may be removed and their pre-images swept.
func Expired[E cmp.Ordered](epochs map[E]time.Time, now time.Time, grace time.Duration) []E {
	var out []E
	for e, exp := range epochs {
		if !exp.Add(grace).After(now) {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

// Live tells whether a reader may still read epoch e at now: it is in
// epochs and has not expired (without grace: the reader stops first).
func Live[E comparable](epochs map[E]time.Time, e E, now time.Time) bool {
	exp, ok := epochs[e]
	return ok && now.Before(exp)
}

// PreImage is an item as of an epoch's instant (Exists false: absent).
type PreImage struct {
	Item   []byte
	Exists bool
}

// Resolve is the reader's choice for one item: the pre-image of its epoch
// when the item has one (pre non-nil), else the stored item (nil when the
// item does not exist now). It returns the item as of the instant and
// whether it existed then.
func Resolve(stored []byte, storedExists bool, pre *PreImage) ([]byte, bool) {
	if pre != nil {
		return pre.Item, pre.Exists
	}
	return stored, storedExists
}
