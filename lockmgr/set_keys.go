package lockmgr

import "sort"

// Keys lists the keys the Set holds, sorted by name, for messages and logs.
func (s *Set) Keys() []Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Key, 0, len(s.held))
	for _, l := range s.leases {
		out = append(out, l.Keys()...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
