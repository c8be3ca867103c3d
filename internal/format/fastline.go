package format

// The whole-line fast path. A line that lies whole in one decompressed
// block is first parsed by the DynamoDB-JSON grammar of an item:
//
//	{"Item":{ "name":VALUE ( , "name":VALUE )* }}
//	VALUE = {"S":STR} | {"N":STR} | {"B":STR} | {"BOOL":true|false} | {"NULL":true}
//	      | {"SS":[STR,...]} | {"NS":[STR,...]} | {"BS":[STR,...]}
//	      | {"L":[VALUE,...]} | {"M":{ "name":VALUE,... }}
//
// with no whitespace. Everything the fast path accepts, the general
// scanner (lineScanner.feed) accepts too: it is balanced JSON made of
// strings, brackets, commas, colons and the literals true and false, in
// the {"Item":{...}} frame, with every item member of the form
// "name":value. The fast path gives up (ok false) on anything else, and on
// every case where the general scanner would look closer or refuse: a
// backslash in an item member name, a key attribute twice or missing, a
// key value longer than maxKeyValCap, nesting deeper than fastMaxLevel, a
// key value of the wrong type or that does not decode. The caller then runs
// the general scanner on the same bytes, which stays the only authority for
// refusing a line and for its error message. Key values are decoded by the
// same function as the general scanner's (keyFrom), so both extract the
// same key. TestFastLineDifferential and FuzzScanLine check all of this.

// fastMaxLevel bounds the DynamoDB nesting (M and L levels) the fast path
// follows; the general scanner's JSON limit (maxNesting) is far above
// 2*fastMaxLevel+2.
const fastMaxLevel = 32

// fastLine parses a whole line (without its newline) and returns its key
// attributes' raw values (nil for the sort key when the table has none).
func (s *lineScanner) fastLine(p []byte) (hv, rv []byte, ok bool) {
	const head = LinePrefix + "{"
	if len(p) < len(head)+2 || string(p[:len(head)]) != head || p[len(head)] != '"' {
		return nil, nil, false
	}
	hasRange := s.schema.HasRange()
	i := len(head)
	for {
		// p[i] is the opening quote of a member name.
		j := fastName(p, i+1)
		if j < 0 || j+1 >= len(p) || p[j+1] != ':' {
			return nil, nil, false
		}
		name := p[i+1 : j]
		vs := j + 2
		ve := fastValue(p, vs, 1)
		if ve < 0 || ve >= len(p) {
			return nil, nil, false
		}
		if len(name) <= maxNameCap {
			switch {
			case string(name) == s.schema.HashName:
				if hv != nil || ve-vs > maxKeyValCap {
					return nil, nil, false
				}
				hv = p[vs:ve]
			case hasRange && string(name) == s.schema.RangeName:
				if rv != nil || ve-vs > maxKeyValCap {
					return nil, nil, false
				}
				rv = p[vs:ve]
			}
		}
		switch p[ve] {
		case ',':
			i = ve + 1
			if i >= len(p) || p[i] != '"' {
				return nil, nil, false
			}
			continue
		case '}':
			if ve+2 != len(p) || p[ve+1] != '}' || hv == nil || hasRange && rv == nil {
				return nil, nil, false
			}
			return hv, rv, true
		}
		return nil, nil, false
	}
}

// fastName finds the closing quote of an item member name whose content
// starts at p[i]; -1 when the name holds a backslash (the general scanner
// unescapes such names) or the line ends inside it.
func fastName(p []byte, i int) int {
	for k := i; k < len(p); k++ {
		switch p[k] {
		case '"':
			return k
		case '\\':
			return -1
		}
	}
	return -1
}

// fastString returns the index just past the closing quote of a string
// whose content starts at p[i], or -1.
func fastString(p []byte, i int) int {
	j, done, _ := skipString(p, i)
	if !done {
		return -1
	}
	return j + 1
}

// fastValue parses one attribute value starting at p[i] and returns the
// index just past it, or -1.
func fastValue(p []byte, i, level int) int {
	if i+8 > len(p) || p[i] != '{' || p[i+1] != '"' {
		return -1
	}
	// The one-letter string types first: they are most values.
	if p[i+3] == '"' {
		switch p[i+2] {
		case 'S', 'N', 'B':
			if p[i+4] != ':' || p[i+5] != '"' {
				return -1
			}
			return fastClose(p, fastString(p, i+6))
		case 'L':
			if string(p[i+4:i+6]) != ":[" || level >= fastMaxLevel {
				return -1
			}
			j := i + 6
			if p[j] == ']' {
				return fastClose(p, j+1)
			}
			for {
				if j = fastValue(p, j, level+1); j < 0 || j >= len(p) {
					return -1
				}
				if p[j] == ']' {
					return fastClose(p, j+1)
				}
				if p[j] != ',' {
					return -1
				}
				j++
			}
		case 'M':
			if string(p[i+4:i+6]) != ":{" || level >= fastMaxLevel {
				return -1
			}
			j := i + 6
			if p[j] == '}' {
				return fastClose(p, j+1)
			}
			for {
				// "name":VALUE; nested names are plain strings to the
				// general scanner, escapes included.
				if j >= len(p) || p[j] != '"' {
					return -1
				}
				if j = fastString(p, j+1); j < 0 || j >= len(p) || p[j] != ':' {
					return -1
				}
				if j = fastValue(p, j+1, level+1); j < 0 || j >= len(p) {
					return -1
				}
				if p[j] == '}' {
					return fastClose(p, j+1)
				}
				if p[j] != ',' {
					return -1
				}
				j++
			}
		}
		return -1
	}
	switch string(p[i+2 : i+7]) {
	case `SS":[`, `NS":[`, `BS":[`:
		j := i + 7
		for {
			if j >= len(p) || p[j] != '"' {
				return -1
			}
			if j = fastString(p, j+1); j < 0 || j >= len(p) {
				return -1
			}
			if p[j] == ']' {
				return fastClose(p, j+1)
			}
			if p[j] != ',' {
				return -1
			}
			j++
		}
	case `BOOL"`:
		if i+13 <= len(p) && string(p[i+7:i+13]) == ":true}" {
			return i + 13
		}
		if i+14 <= len(p) && string(p[i+7:i+14]) == ":false}" {
			return i + 14
		}
	case `NULL"`:
		if i+13 <= len(p) && string(p[i+7:i+13]) == ":true}" {
			return i + 13
		}
	}
	return -1
}

// fastClose expects the '}' that ends a value at p[j] (j may be -1).
func fastClose(p []byte, j int) int {
	if j < 0 || j >= len(p) || p[j] != '}' {
		return -1
	}
	return j + 1
}

// scanWhole checks a whole line (without its newline) and returns its key:
// the fast path when it recognises the line, else the general scanner
// (reset first).
func (s *lineScanner) scanWhole(line []byte) (Key, error) {
	if hv, rv, ok := s.fastLine(line); ok {
		if k, err := s.keyFrom(hv, rv); err == nil {
			return k, nil
		}
	}
	s.reset()
	if err := s.feed(line); err != nil {
		return Key{}, err
	}
	return s.finish()
}
