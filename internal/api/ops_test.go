package api

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
)

// TestOutageMessagesAreActionable: a backend outage reaches the client as
// a message that says what is wrong (not "unavailable: unavailable"), and
// the driver's cause stays in the server log.
func TestOutageMessagesAreActionable(t *testing.T) {
	st, body, internal := mapError(backend.Wrap(backend.KindUnavailable, errors.New("dial tcp 10.0.0.5:5432: connection refused"), "postgres: get item"))
	if st != 503 || internal || !strings.HasPrefix(body.Message, "Storage backend unavailable: postgres: get item") {
		t.Fatalf("unavailable: %d %v %q", st, internal, body.Message)
	}
	if strings.Contains(body.Message, "10.0.0.5") {
		t.Fatalf("driver cause leaked to the client: %q", body.Message)
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	_, body, _ = mapError(backend.Wrap(backend.KindUnavailable, fmt.Errorf("failed to connect: %w", refused), "postgres: acquire connection"))
	if !strings.HasPrefix(body.Message, "Storage backend unreachable: postgres: acquire connection") {
		t.Fatalf("connection refused: %q", body.Message)
	}
	_, body, _ = mapError(backend.Errorf(backend.KindSchema, "the postgres database has 1 pending migration(s) (0002_x); run `extenddb migrate`"))
	if !strings.HasPrefix(body.Message, "Storage schema not ready: ") || !strings.Contains(body.Message, "extenddb migrate") {
		t.Fatalf("schema: %q", body.Message)
	}
}
