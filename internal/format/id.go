package format

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// BackupIDLen is the length of a backup id: 14 digits, '-', 8 hex digits.
const BackupIDLen = 14 + 1 + 8

// maxIDMillis is the largest epoch millisecond count with 14 digits.
const maxIDMillis = 99999999999999

// ErrBackupID: a malformed backup id.
var ErrBackupID = errors.New("malformed backup id")

// MintBackupID returns a new backup id for a snapshot taken at t: the
// 14-digit zero-padded Unix milliseconds of t, '-', 8 random lowercase hex
// digits read from rnd (crypto/rand when nil).
func MintBackupID(t time.Time, rnd io.Reader) (string, error) {
	ms := t.UnixMilli()
	if ms < 0 || ms > maxIDMillis {
		return "", fmt.Errorf("%w: time %s out of range", ErrBackupID, t.UTC().Format(time.RFC3339Nano))
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	var b [4]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return "", fmt.Errorf("backup id: random: %w", err)
	}
	return fmt.Sprintf("%014d-%s", ms, hex.EncodeToString(b[:])), nil
}

// ParseBackupID checks a backup id and returns the instant it encodes
// (UTC, millisecond precision) and its random suffix.
func ParseBackupID(id string) (time.Time, string, error) {
	if len(id) != BackupIDLen || id[14] != '-' {
		return time.Time{}, "", fmt.Errorf("%w: %q", ErrBackupID, id)
	}
	for i := 0; i < 14; i++ {
		if id[i] < '0' || id[i] > '9' {
			return time.Time{}, "", fmt.Errorf("%w: %q", ErrBackupID, id)
		}
	}
	for i := 15; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return time.Time{}, "", fmt.Errorf("%w: %q", ErrBackupID, id)
		}
	}
	ms, err := strconv.ParseInt(id[:14], 10, 64)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("%w: %q", ErrBackupID, id)
	}
	return time.UnixMilli(ms).UTC(), id[15:], nil
}

// TimeLayout is the layout of backup_creation_date_time: RFC 3339, UTC,
// millisecond precision.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// FormatTime formats t as the manifest writes instants (UTC, truncated to
// milliseconds).
func FormatTime(t time.Time) string { return t.UTC().Truncate(time.Millisecond).Format(TimeLayout) }

// ParseTime parses an instant in exactly the form FormatTime writes.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(TimeLayout, s)
	if err != nil || t.Format(TimeLayout) != s {
		return time.Time{}, fmt.Errorf("time %q is not RFC 3339 UTC with milliseconds", s)
	}
	return t, nil
}
