//go:build race

package format

// raceEnabled: the race detector makes sync.Pool drop buffers at random
// and shadows memory, so memory bounds are looser under -race.
const raceEnabled = true
