package parser

// Keys returns, for the key columns cols (lowercased names), the key tuples
// the predicate pins: one tuple per conjunction of Or, each aligned with
// cols. ok is false when some conjunction does not pin every key column
// (the statement may touch rows beyond any finite set of keys), when p is
// nil or Unkeyed, or when cols is empty. Tuples may repeat; callers
// normalise and deduplicate after binding placeholders. Safe for concurrent
// use: it only reads p.
func (p *Predicate) Keys(cols []string) (tuples [][]Value, ok bool) {
	if p == nil || p.Unkeyed || len(cols) == 0 || len(p.Or) == 0 {
		return nil, false
	}
	tuples = make([][]Value, 0, len(p.Or))
	for _, conj := range p.Or {
		tuple := make([]Value, len(cols))
		for i, col := range cols {
			v, found := conj.value(col)
			if !found {
				return nil, false
			}
			tuple[i] = v
		}
		tuples = append(tuples, tuple)
	}
	return tuples, true
}

// value returns the first atom's value for col. A row that satisfies the
// conjunction equals every such atom, so any one of them names it.
func (c Conj) value(col string) (Value, bool) {
	for _, a := range c {
		if a.Column == col {
			return a.Value, true
		}
	}
	return Value{}, false
}
