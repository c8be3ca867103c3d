package mongodb

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/extenddb/extenddb/internal/backend"
)

// Keys are stored as strings that MongoDB (and FerretDB, whose binary
// values sort by length first) compares bytewise in the order the
// contract needs: lowercase hex keeps the unsigned byte order of the key
// bytes, including "a prefix sorts first", and '/' (below every hex digit)
// separates fields, so a concatenation sorts as the tuple of its fields.
//
//	item _id:      %08x(KeyHash(pk)) hex(pk) "/" hex(sk)
//	index key i_X: %08x(KeyHash(ipk)) hex(ipk) "/" hex(isk) "/" hex(pk) "/" hex(sk)
//
// Sorting by _id is therefore the Scan order (KeyHash(pk), pk, sk), and a
// partition is the range [prefix, prefix+"~"). The same holds for an
// index and its Scan order (KeyHash(ipk), ipk, isk, pk, sk).

const sep = "/"

// top sorts after every key character ('/', '0'-'9', 'a'-'f').
const top = "~"

func hashHex(pk []byte) string { return fmt.Sprintf("%08x", backend.KeyHash(pk)) }

// partPrefix is the common prefix of every key in a partition.
func partPrefix(pk []byte) string { return hashHex(pk) + hex.EncodeToString(pk) + sep }

func itemID(pk, sk []byte) string { return partPrefix(pk) + hex.EncodeToString(sk) }

func indexKey(ipk, isk, pk, sk []byte) string {
	return partPrefix(ipk) + hex.EncodeToString(isk) + sep + hex.EncodeToString(pk) + sep + hex.EncodeToString(sk)
}

// indexField names the fields of a secondary index in an item document.
// Index names may hold '.', which MongoDB reads as a path: hex avoids it.
func indexField(index string) string { return "i_" + hex.EncodeToString([]byte(index)) }
func projField(index string) string  { return "j_" + hex.EncodeToString([]byte(index)) }

// splitKey decodes the hex fields of a key after its 8 hash characters.
func splitKey(k string, n int) ([][]byte, error) {
	if len(k) < 8 {
		return nil, fmt.Errorf("mongodb: malformed key %q", k)
	}
	parts := strings.Split(k[8:], sep)
	if len(parts) != n {
		return nil, fmt.Errorf("mongodb: malformed key %q", k)
	}
	out := make([][]byte, n)
	for i, p := range parts {
		b, err := hex.DecodeString(p)
		if err != nil {
			return nil, fmt.Errorf("mongodb: malformed key %q: %w", k, err)
		}
		out[i] = b
	}
	return out, nil
}
