package format

import (
	"crypto/sha256"
	"encoding/hex"
)

// SidecarLen is the exact length of a sidecar: 64 hex digits, two spaces,
// the manifest name and a newline.
const SidecarLen = 64 + 2 + len(ManifestName) + 1

// Sidecar returns the sidecar for the manifest's stored bytes, in
// sha256sum form: "<64 lowercase hex>  extenddb-manifest.json\n".
func Sidecar(manifest []byte) []byte {
	sum := sha256.Sum256(manifest)
	out := make([]byte, 0, SidecarLen)
	out = hex.AppendEncode(out, sum[:])
	out = append(out, "  "...)
	out = append(out, ManifestName...)
	return append(out, '\n')
}

// ParseSidecar checks that data is exactly one sha256sum line naming the
// manifest and returns the hash. No other form is accepted (no uppercase,
// no binary-mode '*', no missing newline, nothing after it). The error
// wraps ErrSidecarForm.
func ParseSidecar(data []byte) ([32]byte, error) {
	var sum [32]byte
	if len(data) != SidecarLen {
		return sum, sidecarFormErr("length %d, want %d", len(data), SidecarLen)
	}
	for i := 0; i < 64; i++ {
		c := data[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return sum, sidecarFormErr("byte %d is not a lowercase hex digit", i)
		}
	}
	if string(data[64:]) != "  "+ManifestName+"\n" {
		return sum, sidecarFormErr("expected two spaces, %s and a newline after the hash", ManifestName)
	}
	if _, err := hex.Decode(sum[:], data[:64]); err != nil {
		return sum, sidecarFormErr("%v", err)
	}
	return sum, nil
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
