package expr

// TopLevelNames returns the distinct top-level attribute names the
// condition reads, in first-use order (the engine refuses key attributes
// in a Query's FilterExpression).
func (c *Condition) TopLevelNames() []string {
	if c == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	var op func(o *operand)
	op = func(o *operand) {
		if o == nil {
			return
		}
		if len(o.path) > 0 && !seen[o.path[0].Name] {
			seen[o.path[0].Name] = true
			out = append(out, o.path[0].Name)
		}
		for _, a := range o.args {
			op(a)
		}
	}
	var walk func(n cnode)
	walk = func(n cnode) {
		switch x := n.(type) {
		case *cAnd:
			walk(x.l)
			walk(x.r)
		case *cOr:
			walk(x.l)
			walk(x.r)
		case *cNot:
			walk(x.x)
		case *cCmp:
			op(x.l)
			op(x.r)
		case *cBetween:
			op(x.x)
			op(x.lo)
			op(x.hi)
		case *cIn:
			op(x.x)
			for _, o := range x.list {
				op(o)
			}
		case *cFunc:
			op(x.o)
		case cAnd:
			walk(&x)
		case cOr:
			walk(&x)
		case cNot:
			walk(&x)
		case cCmp:
			walk(&x)
		case cBetween:
			walk(&x)
		case cIn:
			walk(&x)
		case cFunc:
			walk(&x)
		}
	}
	walk(c.root)
	return out
}
