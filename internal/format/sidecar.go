package format

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// SidecarLen is the exact length of a version 1 sidecar: 64 hex digits,
// two spaces, the manifest name and a newline.
const SidecarLen = 64 + 2 + len(ManifestName) + 1

// MaxSidecarBytes bounds the sidecar a reader loads (one line of about 90
// bytes per data file: a million files fit).
const MaxSidecarBytes = 256 << 20

// SidecarLine is one line of a sidecar: a file's SHA-256 and its name
// relative to the backup's prefix.
type SidecarLine struct {
	Sum  [32]byte
	Name string
}

// Sidecar returns a version 1 sidecar for the manifest's stored bytes, in
// sha256sum form: "<64 lowercase hex>  extenddb-manifest.json\n".
func Sidecar(manifest []byte) []byte {
	return SidecarOf([]SidecarLine{{Sum: sha256.Sum256(manifest), Name: ManifestName}})
}

// SidecarOf writes sidecar lines in sha256sum form.
func SidecarOf(lines []SidecarLine) []byte {
	var out []byte
	for _, l := range lines {
		out = hex.AppendEncode(out, l.Sum[:])
		out = append(out, "  "...)
		out = append(out, l.Name...)
		out = append(out, '\n')
	}
	return out
}

// sidecarLines is the sidecar of a version 2 backup: every data file, the
// AWS export manifests and, last, the manifest, so that `sha256sum -c`
// checks every file of the backup.
func sidecarLines(m *Manifest, files, summary, manifest []byte) []SidecarLine {
	lines := make([]SidecarLine, 0, len(m.DataFiles)+3)
	prefix := PrefixOf(mustARN(m.BackupARN))
	for _, f := range m.DataFiles {
		var sum [32]byte
		hex.Decode(sum[:], []byte(f.SHA256))
		lines = append(lines, SidecarLine{Sum: sum, Name: strings.TrimPrefix(f.Key, prefix)})
	}
	return append(lines,
		SidecarLine{Sum: sha256.Sum256(files), Name: ManifestFilesName},
		SidecarLine{Sum: sha256.Sum256(summary), Name: ManifestSummaryName},
		SidecarLine{Sum: sha256.Sum256(manifest), Name: ManifestName})
}

func mustARN(s string) ARN {
	a, _ := ParseARN(s)
	return a
}

// ParseSidecarLines checks that data is one or more sha256sum lines (64
// lowercase hex digits, two spaces, a name of printable characters without
// '\\' or a leading '*', a newline), names unique, the last one naming the
// manifest, and returns them. No other form is accepted (no uppercase, no
// binary-mode '*', no missing newline, no empty line, nothing after the
// last). Which lines a backup must have depends on its format version
// (see Open). The error wraps ErrSidecarForm.
func ParseSidecarLines(data []byte) ([]SidecarLine, error) {
	if len(data) == 0 {
		return nil, sidecarFormErr("empty")
	}
	if data[len(data)-1] != '\n' {
		return nil, sidecarFormErr("the last line has no newline")
	}
	var lines []SidecarLine
	seen := map[string]bool{}
	for n, rest := 1, data; len(rest) > 0; n++ {
		i := bytes.IndexByte(rest, '\n')
		line := rest[:i]
		rest = rest[i+1:]
		if len(line) < 64+3 {
			return nil, sidecarFormErr("line %d is too short", n)
		}
		for j := 0; j < 64; j++ {
			c := line[j]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return nil, sidecarFormErr("line %d: byte %d is not a lowercase hex digit", n, j)
			}
		}
		if string(line[64:66]) != "  " {
			return nil, sidecarFormErr("line %d: expected two spaces after the hash", n)
		}
		name := string(line[66:])
		for _, c := range []byte(name) {
			if c < 0x20 || c == 0x7f || c == '\\' {
				return nil, sidecarFormErr("line %d: the name has a control character or a backslash", n)
			}
		}
		if name[0] == '*' || name[0] == ' ' || strings.Contains(name, "..") || name[0] == '/' {
			return nil, sidecarFormErr("line %d: name %q is not a file of the backup", n, name)
		}
		if seen[name] {
			return nil, sidecarFormErr("line %d: %s is listed twice", n, name)
		}
		seen[name] = true
		var l SidecarLine
		hex.Decode(l.Sum[:], line[:64])
		l.Name = name
		lines = append(lines, l)
	}
	if lines[len(lines)-1].Name != ManifestName {
		return nil, sidecarFormErr("expected two spaces, %s and a newline after the hash on the last line", ManifestName)
	}
	return lines, nil
}

// ParseSidecar parses a sidecar (see ParseSidecarLines) and returns the
// manifest's hash (the last line's).
func ParseSidecar(data []byte) ([32]byte, error) {
	lines, err := ParseSidecarLines(data)
	if err != nil {
		return [32]byte{}, err
	}
	return lines[len(lines)-1].Sum, nil
}

func sidecarFormErr(format string, args ...any) error {
	return fileErr(SidecarName, ErrSidecarForm, format, args...)
}

// CheckSidecar checks a sidecar against the manifest's bytes. The errors
// name sidecarKey and wrap ErrSidecarForm or ErrSidecarMismatch.
func CheckSidecar(sidecarKey string, sidecar, manifest []byte) error {
	sum, err := ParseSidecar(sidecar)
	if err != nil {
		fe := err.(*FileError)
		fe.Key = sidecarKey
		return fe
	}
	got := sha256.Sum256(manifest)
	if got != sum {
		return fileErr(sidecarKey, ErrSidecarMismatch, "sidecar says %x, manifest hashes to %x", sum, got)
	}
	return nil
}
