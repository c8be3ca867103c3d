package expr

import (
	"sort"

	"github.com/extenddb/extenddb/internal/attr"
)

// Projection is a parsed ProjectionExpression.
type Projection struct {
	Paths []Path
}

// ParseProjection parses and validates a projection expression: a comma
// separated list of document paths that must not overlap.
func ParseProjection(s string, env *Env) (*Projection, error) {
	const kind = KindProjection
	if err := prelude(kind, s); err != nil {
		return nil, err
	}
	p := newParser(kind, s, env)
	p.proj = true
	var paths []Path
	for {
		path, err := p.parsePath()
		if err != nil {
			return nil, p.wrapSyntax(err)
		}
		paths = append(paths, path)
		if p.peekKind() == tComma {
			p.next()
			continue
		}
		if p.peekKind() != tEOF {
			return nil, p.wrapSyntax(p.syntax())
		}
		break
	}
	if msg := checkPathOverlaps(paths); msg != "" {
		p.fail(catOverlap, msg)
	}
	if err := p.updateSemanticError(); err != nil {
		return nil, err
	}
	return &Projection{Paths: paths}, nil
}

// TopLevelNames returns the distinct top-level attribute names the
// projection reads, in expression order.
func (p *Projection) TopLevelNames() []string {
	seen := map[string]bool{}
	var out []string
	for _, path := range p.Paths {
		if n := path[0].Name; !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// Apply projects item; see ProjectPaths.
func (p *Projection) Apply(item attr.Item) attr.Item { return ProjectPaths(item, p.Paths) }

// projNode is a trie of requested paths.
type projNode struct {
	all     bool // the whole value is requested
	names   map[string]*projNode
	indexes map[int]*projNode
}

func (n *projNode) child(e PathElem) *projNode {
	if e.IsIndex {
		if n.indexes == nil {
			n.indexes = map[int]*projNode{}
		}
		c := n.indexes[e.Index]
		if c == nil {
			c = &projNode{}
			n.indexes[e.Index] = c
		}
		return c
	}
	if n.names == nil {
		n.names = map[string]*projNode{}
	}
	c := n.names[e.Name]
	if c == nil {
		c = &projNode{}
		n.names[e.Name] = c
	}
	return c
}

// ProjectPaths returns the parts of item the paths select, nested as in the
// item: map keys keep their place, selected list elements keep their
// relative order and are compacted. Paths that select nothing contribute
// nothing. The result shares values with item.
func ProjectPaths(item attr.Item, paths []Path) attr.Item {
	if item == nil {
		return nil
	}
	root := &projNode{}
	for _, path := range paths {
		n := root
		for _, e := range path {
			n = n.child(e)
		}
		n.all = true
	}
	out := attr.Item{}
	for name, c := range root.names {
		v, ok := item[name]
		if !ok {
			continue
		}
		if pv, ok := project(v, c); ok {
			out[name] = pv
		}
	}
	return out
}

func project(v attr.Value, n *projNode) (attr.Value, bool) {
	if n.all {
		return v, true
	}
	switch v.Type {
	case attr.M:
		if len(n.names) == 0 {
			return attr.Value{}, false
		}
		m := map[string]attr.Value{}
		for name, c := range n.names {
			if x, ok := v.Map[name]; ok {
				if px, ok := project(x, c); ok {
					m[name] = px
				}
			}
		}
		if len(m) == 0 {
			return attr.Value{}, false
		}
		return attr.Value{Type: attr.M, Map: m}, true
	case attr.L:
		if len(n.indexes) == 0 {
			return attr.Value{}, false
		}
		idx := make([]int, 0, len(n.indexes))
		for i := range n.indexes {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		var l []attr.Value
		for _, i := range idx {
			if i < len(v.List) {
				if px, ok := project(v.List[i], n.indexes[i]); ok {
					l = append(l, px)
				}
			}
		}
		if len(l) == 0 {
			return attr.Value{}, false
		}
		return attr.Value{Type: attr.L, List: l}, true
	}
	return attr.Value{}, false
}
