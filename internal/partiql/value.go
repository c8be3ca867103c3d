package partiql

import (
	"github.com/extenddb/extenddb/internal/attr"
)

// ParamCountError is DynamoDB's message when the request's Parameters do
// not match the statement's ? placeholders.
const paramCountMsg = "Number of parameters in request and statement don't match."

// CheckParams checks that params has one value per placeholder.
func (s *Statement) CheckParams(params []attr.Value) error {
	if len(params) != s.Params {
		return attr.Validation(paramCountMsg)
	}
	return nil
}

// Value binds a value expression (a literal, a parameter or a collection
// literal holding either) to an attribute value. where names the place
// for messages (an attribute name or "item").
func Value(e Expr, params []attr.Value) (attr.Value, error) {
	return bind(e, params, 0, "item")
}

// Item binds INSERT's item: a map literal or a parameter holding a map.
// Its attributes are at the top level (depth 0), as in an item on the
// wire.
func Item(e Expr, params []attr.Value) (attr.Item, error) {
	switch x := e.(type) {
	case MapLit:
		v, err := bind(x, params, -1, "item")
		if err != nil {
			return nil, err
		}
		return attr.Item(v.Map), nil
	case Param:
		v, err := bind(x, params, -1, "item")
		if err != nil {
			return nil, err
		}
		if v.Type == attr.M {
			return attr.Item(v.Map), nil
		}
	}
	return nil, attr.Validation("Unsupported format in item expression. Please use struct format {...} to express item values for insert statement.")
}

var errNesting = attr.Validation("Nesting Levels have exceeded supported limits")

func bind(e Expr, params []attr.Value, depth int, under string) (attr.Value, error) {
	if depth > attr.MaxDepth {
		return attr.Value{}, errNesting
	}
	switch x := e.(type) {
	case Lit:
		return x.V, nil
	case Param:
		if x.N >= len(params) {
			return attr.Value{}, attr.Validation(paramCountMsg)
		}
		v := params[x.N]
		if depth > 0 && depth+attr.Nesting(v) > attr.MaxDepth {
			return attr.Value{}, errNesting
		}
		return v, nil
	case ListLit:
		l := make([]attr.Value, len(x.Elems))
		for i, el := range x.Elems {
			v, err := bind(el, params, depth+1, under)
			if err != nil {
				return attr.Value{}, err
			}
			l[i] = v
		}
		return attr.ListValue(l), nil
	case MapLit:
		m := make(map[string]attr.Value, len(x.Keys))
		for i, k := range x.Keys {
			if _, dup := m[k]; dup {
				return attr.Value{}, attr.Validation("Duplicate keys in tuple. Key: " + clip(k) + " under " + clip(under))
			}
			if len(k) > attr.MaxNameBytes {
				return attr.Value{}, attr.Validation("1 validation error detected: Attribute name is too large, must be less than " + itoa(attr.MaxNameBytes+1) + " bytes")
			}
			v, err := bind(x.Vals[i], params, depth+1, k)
			if err != nil {
				return attr.Value{}, err
			}
			m[k] = v
		}
		return attr.MapValue(m), nil
	case SetLit:
		return bindSet(x, params, under)
	case MissingLit:
		return attr.Value{}, attr.Validation("MISSING must be compared using IS operator")
	case PathExpr:
		return attr.Value{}, attr.Validation("Unsupported data type: a variable reference (" + clip(x.Path.Name) + ") under key " + clip(under) + "; use a literal or a ? parameter")
	}
	return attr.Value{}, attr.Validation("Unsupported data type: an expression under key " + clip(under) + "; use a literal or a ? parameter")
}

func bindSet(x SetLit, params []attr.Value, under string) (attr.Value, error) {
	var set attr.Value
	for i, el := range x.Elems {
		v, err := bind(el, params, 0, under)
		if err != nil {
			return attr.Value{}, err
		}
		var t attr.Type
		switch v.Type {
		case attr.S:
			t = attr.SS
		case attr.N:
			t = attr.NS
		case attr.B:
			t = attr.BS
		default:
			return attr.Value{}, attr.Validation("Unsupported data type in Bag. DynamoDB only supports either numbers or strings in bags")
		}
		if i == 0 {
			set.Type = t
		} else if set.Type != t {
			return attr.Value{}, attr.Validation("Unexpected data type " + v.Type.String() + " in " + map[attr.Type]string{attr.SS: "String", attr.NS: "Number", attr.BS: "Binary"}[set.Type] + " Set under key " + clip(under))
		}
		if t == attr.BS {
			set.Bins = append(set.Bins, v.Bin)
		} else {
			set.Strs = append(set.Strs, v.Str)
		}
	}
	if err := attr.CheckSet(&set); err != nil {
		return attr.Value{}, err
	}
	return set, nil
}
