package postgres

import (
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// TestChangeLogTwoPools: the concurrent change log scenario with writers
// on two pools of one database (two servers), the reader on the second.
func TestChangeLogTwoPools(t *testing.T) {
	need(t)
	b1 := backend.Checked(openT(t, Options{DSN: testDSN, MaxConns: 8}), func(err error) { t.Error(err) })
	b2 := backend.Checked(openT(t, Options{DSN: testDSN, MaxConns: 8}), func(err error) { t.Error(err) })
	ref := createTable(t, openT(t, Options{DSN: testDSN, MaxConns: 1}), "changelog-two-pools")
	cl1 := b1.Capabilities().ChangeLog
	cl2 := b2.Capabilities().ChangeLog
	backendtest.ChangeLogScenario(t, []backend.Backend{b1, b2}, []backend.ChangeLog{cl1, cl2}, ref, 16, 60, 200)
}

// TestChangeLogReopen: records survive closing the pool and opening
// another.
func TestChangeLogReopen(t *testing.T) {
	need(t)
	backendtest.ChangeLogReopen(t, func(t *testing.T) backend.Backend {
		b, err := Open(t.Context(), Options{DSN: testDSN})
		if err != nil {
			t.Fatal(err)
		}
		return backend.Checked(b, func(err error) { t.Error(err) })
	})
}
