//go:build race

package backup

// raceEnabled: the race detector slows every job several times; scale
// tests use smaller sizes under it.
const raceEnabled = true
