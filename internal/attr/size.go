package attr

// MaxItemSize is DynamoDB's item size limit (400 KB).
const MaxItemSize = 400 * 1024

// numberSize approximates the service's stored size of a number: one byte
// per two significant digits plus one.
func numberSize[T string | []byte](s T) int {
	digits := 0
	lead := true
	trailingZeros := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 'E' || c == 'e' {
			break
		}
		if c < '0' || c > '9' {
			continue
		}
		if lead && c == '0' {
			continue
		}
		lead = false
		digits++
		if c == '0' {
			trailingZeros++
		} else {
			trailingZeros = 0
		}
	}
	digits -= trailingZeros
	return (digits+1)/2 + 1
}

// ValueSize is the size of a value as DynamoDB counts it.
func ValueSize(v Value) int {
	switch v.Type {
	case S, N, B:
		if v.Type == S {
			return len(v.Str)
		}
		if v.Type == B {
			return len(v.Bin)
		}
		return numberSize(v.Str)
	case BOOL, NULL:
		return 1
	case M:
		n := 3
		for k, e := range v.Map {
			n += len(k) + ValueSize(e) + 1
		}
		return n
	case L:
		n := 3
		for _, e := range v.List {
			n += ValueSize(e) + 1
		}
		return n
	case SS:
		n := 0
		for _, s := range v.Strs {
			n += len(s)
		}
		return n
	case NS:
		n := 0
		for _, s := range v.Strs {
			n += numberSize(s)
		}
		return n
	case BS:
		n := 0
		for _, b := range v.Bins {
			n += len(b)
		}
		return n
	}
	return 0
}

// ItemSize is the size of an item as DynamoDB counts it: attribute name
// lengths plus value sizes.
func ItemSize(it Item) int {
	n := 0
	for k, v := range it {
		n += len(k) + ValueSize(v)
	}
	return n
}
