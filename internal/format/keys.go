package format

import (
	"fmt"
	"strconv"
	"strings"
)

// Object names. The format package alone decides them.
const (
	// StoreIdentityKey is the store identity object at the store root.
	StoreIdentityKey = "extenddb-store.json"
	// ManifestName is the extenddb manifest inside a backup prefix.
	ManifestName = "extenddb-manifest.json"
	// SidecarName is the manifest's sha256sum sidecar, written last.
	SidecarName = ManifestName + ".sha256"
	// ManifestFilesName is the AWS export files manifest (JSON lines).
	ManifestFilesName = "manifest-files.json"
	// ManifestSummaryName is the AWS export summary.
	ManifestSummaryName = "manifest-summary.json"
	// DataDir is the directory of data files inside a backup prefix.
	DataDir = "data"
	// DataFileExt ends every data file name.
	DataFileExt = ".json.zst"
)

// Prefix returns the key prefix of a backup, ending in '/':
// "<account>/<table>/<backup_id>/".
func Prefix(account, table, backupID string) string {
	return account + "/" + table + "/" + backupID + "/"
}

// PrefixOf returns the key prefix of the backup an ARN names.
func PrefixOf(a ARN) string { return Prefix(a.Account, a.Table, a.BackupID) }

// ParsePrefix splits a backup prefix (with or without the trailing '/')
// into account, table and backup id, checking each.
func ParsePrefix(prefix string) (account, table, backupID string, err error) {
	p := strings.TrimSuffix(prefix, "/")
	parts := strings.Split(p, "/")
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("%w: prefix %q is not <account>/<table>/<backup_id>", ErrPrefixMismatch, prefix)
	}
	if err := checkAccount(parts[0]); err != nil {
		return "", "", "", fmt.Errorf("%w: prefix %q: %w", ErrPrefixMismatch, prefix, err)
	}
	if err := CheckTableName(parts[1]); err != nil {
		return "", "", "", fmt.Errorf("%w: prefix %q: %w", ErrPrefixMismatch, prefix, err)
	}
	if _, _, err := ParseBackupID(parts[2]); err != nil {
		return "", "", "", fmt.Errorf("%w: prefix %q: %w", ErrPrefixMismatch, prefix, err)
	}
	return parts[0], parts[1], parts[2], nil
}

// DataFileName returns the name of the n-th data file (n from 1) relative
// to the backup prefix: "data/000001.json.zst".
func DataFileName(n int) string {
	s := strconv.Itoa(n)
	if len(s) < 6 {
		s = strings.Repeat("0", 6-len(s)) + s
	}
	return DataDir + "/" + s + DataFileExt
}

// DataFileKey returns the full key of the n-th data file (n from 1).
func DataFileKey(prefix string, n int) string { return prefix + DataFileName(n) }

// ManifestKey returns the full key of the extenddb manifest.
func ManifestKey(prefix string) string { return prefix + ManifestName }

// SidecarKey returns the full key of the sidecar.
func SidecarKey(prefix string) string { return prefix + SidecarName }

// ManifestFilesKey returns the full key of manifest-files.json.
func ManifestFilesKey(prefix string) string { return prefix + ManifestFilesName }

// ManifestSummaryKey returns the full key of manifest-summary.json.
func ManifestSummaryKey(prefix string) string { return prefix + ManifestSummaryName }

// DataPrefix returns the prefix of the data files ("<prefix>data/"), the
// location to give AWS ImportTable.
func DataPrefix(prefix string) string { return prefix + DataDir + "/" }
