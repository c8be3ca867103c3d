package config

import (
	"fmt"
	"time"
)

// LegacyDuration is a deprecated key in whole units (timeout_ms,
// lease_seconds, ...) beside the Duration key that replaced it. The
// deprecated key is still accepted: when set (not 0) it wins over the
// Duration key, and the server logs Warning at startup.
type LegacyDuration struct {
	// Key is the deprecated key, Replacement the Duration key.
	Key, Replacement string
	// Value is the deprecated key's value in Unit, 0 when not set.
	Value int
	Unit  time.Duration
	// Duration is the Replacement key's value.
	Duration Duration
}

// Effective is the duration in force.
func (l LegacyDuration) Effective() time.Duration {
	if l.Value != 0 {
		return time.Duration(l.Value) * l.Unit
	}
	return l.Duration.Duration
}

// Validate refuses a deprecated key set below 1 and a duration in force
// that is not positive; the error names the key that was set.
func (l LegacyDuration) Validate() error {
	switch {
	case l.Value < 0:
		return fmt.Errorf("%s must be at least 1", l.Key)
	case l.Effective() <= 0:
		return fmt.Errorf("%s must be positive", l.Replacement)
	}
	return nil
}

// Warning is the startup warning of a deprecated key that is set in
// section (e.g. "storage.mongodb"), "" when it is not set.
func (l LegacyDuration) Warning(section string) string {
	if l.Value == 0 {
		return ""
	}
	return fmt.Sprintf("%s.%s is deprecated: it is used (%s), but write %s = %q instead", section, l.Key,
		l.Effective(), l.Replacement, l.Effective().String())
}

// LegacyWarnings are the startup warnings of the deprecated keys of ls
// that are set in section.
func LegacyWarnings(section string, ls ...LegacyDuration) []string {
	var out []string
	for _, l := range ls {
		if w := l.Warning(section); w != "" {
			out = append(out, w)
		}
	}
	return out
}
