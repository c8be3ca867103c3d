package attr

// ObjectReader walks the members of the JSON object that is a request
// body, for a request decoder's fast path: it reads attribute maps and
// values with this package's parser directly, instead of
// encoding/json's validate-then-skip-then-unmarshal passes over the same
// bytes. It reports only whether the body had the shape the fast path
// handles; on anything else (a syntax error, a null, an unexpected member)
// the caller falls back to encoding/json, which then produces the error
// or the result, so that the fast path never changes what a request
// means or which error it gets.
type ObjectReader struct {
	p     parser
	first bool
}

// NewObjectReader starts reading the object of data; attribute names are
// held to the request limits, as Item.UnmarshalJSON holds them.
func NewObjectReader(data []byte) (*ObjectReader, bool) {
	r := &ObjectReader{p: parser{data: data, wire: true}, first: true}
	r.p.ws()
	if r.p.peek() != '{' {
		return nil, false
	}
	r.p.i++
	return r, true
}

// Next returns the next member's name, positioned at its value; more is
// false at the end of the object (ok is false on a syntax error).
func (r *ObjectReader) Next() (name string, more, ok bool) {
	r.p.ws()
	switch r.p.peek() {
	case '}':
		r.p.i++
		return "", false, true
	case ',':
		if r.first {
			return "", false, false
		}
		r.p.i++
	default:
		if !r.first {
			return "", false, false
		}
	}
	r.first = false
	name, err := r.p.str()
	if err != nil {
		return "", false, false
	}
	r.p.ws()
	if r.p.peek() != ':' {
		return "", false, false
	}
	r.p.i++
	r.p.ws()
	return name, true, true
}

// Null reports whether the value at the cursor is a JSON null (which
// encoding/json treats per field type; the fast path leaves it to it).
func (r *ObjectReader) Null() bool { return r.p.peek() == 'n' }

// String reads a string value.
func (r *ObjectReader) String() (string, bool) {
	if r.p.peek() != '"' {
		return "", false
	}
	s, err := r.p.str()
	return s, err == nil
}

// Bool reads true or false.
func (r *ObjectReader) Bool() (bool, bool) {
	switch {
	case r.p.lit("true"):
		return true, true
	case r.p.lit("false"):
		return false, true
	}
	return false, false
}

// Item reads an attribute map (not null).
func (r *ObjectReader) Item() (Item, bool) {
	if r.p.peek() != '{' {
		return nil, false
	}
	it, err := r.p.item(0)
	return it, err == nil
}

// memberName reads a member's name and its colon inside a map, and checks
// that its value starts with open.
func (r *ObjectReader) memberName(open byte) (string, bool) {
	name, err := r.p.str()
	if err != nil {
		return "", false
	}
	r.p.ws()
	if r.p.peek() != ':' {
		return "", false
	}
	r.p.i++
	r.p.ws()
	return name, r.p.peek() == open
}

// Values reads a map of attribute values (ExpressionAttributeValues); a
// null member value sends the request to the slow path.
func (r *ObjectReader) Values() (map[string]Value, bool) {
	m := map[string]Value{}
	ok := r.members(func() bool {
		name, ok := r.memberName('{')
		if !ok {
			return false
		}
		v, err := r.p.value(0)
		if err != nil {
			return false
		}
		m[name] = v
		return true
	})
	return m, ok
}

// ValueList reads an array of attribute values (PartiQL's Parameters); a
// null element sends the request to the slow path.
func (r *ObjectReader) ValueList() ([]Value, bool) {
	if r.p.peek() != '[' {
		return nil, false
	}
	r.p.i++
	r.p.ws()
	out := []Value{}
	if r.p.peek() == ']' {
		r.p.i++
		return out, true
	}
	for {
		r.p.ws()
		if r.p.peek() != '{' {
			return nil, false
		}
		v, err := r.p.value(0)
		if err != nil {
			return nil, false
		}
		out = append(out, v)
		r.p.ws()
		switch r.p.peek() {
		case ',':
			r.p.i++
		case ']':
			r.p.i++
			return out, true
		default:
			return nil, false
		}
	}
}

// Strings reads a map of strings (ExpressionAttributeNames).
func (r *ObjectReader) Strings() (map[string]string, bool) {
	m := map[string]string{}
	ok := r.members(func() bool {
		name, ok := r.memberName('"')
		if !ok {
			return false
		}
		v, err := r.p.str()
		if err != nil {
			return false
		}
		m[name] = v
		return true
	})
	return m, ok
}

// members reads an object, calling member at each member's name.
func (r *ObjectReader) members(member func() bool) bool {
	if r.p.peek() != '{' {
		return false
	}
	r.p.i++
	r.p.ws()
	if r.p.peek() == '}' {
		r.p.i++
		return true
	}
	for {
		r.p.ws()
		if !member() {
			return false
		}
		r.p.ws()
		switch r.p.peek() {
		case ',':
			r.p.i++
		case '}':
			r.p.i++
			return true
		default:
			return false
		}
	}
}

// End reports whether only whitespace follows the object.
func (r *ObjectReader) End() bool {
	r.p.ws()
	return r.p.i == len(r.p.data)
}
