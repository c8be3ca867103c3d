package attr

// KeyBytes returns the order-preserving key encoding of a key value: S as
// its UTF-8 bytes, B as its bytes, N as the number encoding (see
// numberKey). Unsigned bytewise order of the result is DynamoDB's order.
// Other types cannot be keys; ok is false for them.
func KeyBytes(v Value) (b []byte, ok bool) {
	switch v.Type {
	case S:
		return []byte(v.Str), true
	case B:
		return v.Bin, true
	case N:
		d, good := parseDecimal(v.Str)
		if !good {
			return nil, false
		}
		return numberKey(nil, d), true
	}
	return nil, false
}

// AppendKeyBytes appends the key encoding of v to dst (see KeyBytes)
// without allocating when dst has room.
func AppendKeyBytes(dst []byte, v Value) ([]byte, bool) {
	switch v.Type {
	case S:
		return append(dst, v.Str...), true
	case B:
		return append(dst, v.Bin...), true
	case N:
		var buf [64]byte
		d, good := parseDecimalInto(v.Str, buf[:0])
		if !good {
			return dst, false
		}
		return numberKey(dst, d), true
	}
	return dst, false
}

// AppendNumberKey validates and normalizes number text and appends its
// key encoding to dst.
func AppendNumberKey(dst []byte, s string) ([]byte, error) {
	var buf [64]byte
	d, err := parseNumberDecimalInto(s, buf[:0])
	if err != nil {
		return dst, err
	}
	return numberKey(dst, d), nil
}

// PrefixSuccessor returns the smallest byte string greater than every
// string that starts with p, or nil when there is none (p is all 0xFF).
// begins_with(p) is the range [p, PrefixSuccessor(p)).
func PrefixSuccessor(p []byte) []byte {
	out := append([]byte(nil), p...)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] != 0xFF {
			out[i]++
			return out[:i+1]
		}
	}
	return nil
}

// KeySize is the size DynamoDB counts for a key attribute's value.
func KeySize(v Value) int {
	switch v.Type {
	case S:
		return len(v.Str)
	case B:
		return len(v.Bin)
	case N:
		return numberSize(v.Str)
	}
	return 0
}
