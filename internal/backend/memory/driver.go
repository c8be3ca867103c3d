package memory

import (
	"context"

	"github.com/extenddb/extenddb/internal/backend"
)

// DriverName is the memory backend's name in the driver table
// (storage.backend = "memory"); storage.memory = true selects it too.
const DriverName = "memory"

// Driver is the memory entry of the server's driver table. The backend
// has no config section and no schema.
func Driver() backend.Driver {
	return backend.Driver{
		Name:    DriverName,
		Summary: "native in-memory backend (nothing kept after exit; what storage.memory runs)",
		Open: func(ctx context.Context, env backend.DriverEnv) (backend.Backend, error) {
			return New(Options{ItemSize: env.ItemSize}), nil
		},
		Describe: func(env backend.DriverEnv) []any { return []any{"backend", DriverName, "memory", true} },
	}
}
