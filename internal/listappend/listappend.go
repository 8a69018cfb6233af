// Package listappend checks a history of list-append transactions for the
// anomalies a lost update, a stale read or a non-serializable execution
// leaves behind, in the manner of Jepsen's Elle: every key holds a list,
// transactions read lists and append unique elements to them, and because
// each element is appended once, the final lists give the order in which
// the appends were applied. From that order the checker derives which
// transaction's write every read saw and which it missed, and looks for
// cycles among the committed transactions.
//
// The checks, each an Anomaly kind:
//
//   - duplicate: an element appears twice in a list;
//   - lost: a committed append is missing from its key's final list (a
//     lost update);
//   - phantom: a list holds an element no committed transaction appended
//     (a write of an aborted transaction, or garbage);
//   - incompatible: a committed read is not a prefix of the key's final
//     list (it saw an order of appends the database did not keep);
//   - internal: a read disagrees with the transaction's own earlier read
//     and appends of that key;
//   - cycle: the committed transactions' write-write, write-read and
//     read-write dependencies form a cycle (no serial order explains
//     what they saw).
package listappend

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Op is one operation of a transaction on one key: a read, which observed
// the list Read, or an append of the element Append.
type Op struct {
	Key    int
	Read   []int64 // the list observed, for a read
	Append int64   // the element appended; 0 for a read
}

// IsRead reports whether op is a read.
func (op Op) IsRead() bool { return op.Append == 0 }

// Txn is one committed transaction's operations in the order it did them.
type Txn struct {
	ID  int
	Ops []Op
}

// Anomaly is one violation the checker found.
type Anomaly struct {
	Kind string // duplicate | lost | phantom | incompatible | internal | cycle
	What string
}

func (a Anomaly) String() string { return a.Kind + ": " + a.What }

// Check checks the committed transactions against the final lists, keyed
// by key, read after every transaction ended. Elements must be unique and
// non-zero across the whole history (aborted attempts included), so that
// an element names the one attempt that appended it.
func Check(committed []Txn, final map[int][]int64) []Anomaly {
	var out []Anomaly
	add := func(kind, format string, args ...any) {
		out = append(out, Anomaly{Kind: kind, What: fmt.Sprintf(format, args...)})
	}
	// Who appended each element, among the committed transactions.
	appender := map[int64]int{}
	appendKey := map[int64]int{}
	for _, t := range committed {
		for _, op := range t.Ops {
			if !op.IsRead() {
				appender[op.Append] = t.ID
				appendKey[op.Append] = op.Key
			}
		}
	}
	// Position of every element in its final list.
	pos := map[int][]int64{}
	keys := make([]int, 0, len(final))
	for k := range final {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		l := final[k]
		seen := map[int64]bool{}
		for _, e := range l {
			if seen[e] {
				add("duplicate", "key %d: element %d appears more than once in %v", k, e, short(l))
			}
			seen[e] = true
			if _, ok := appender[e]; !ok {
				add("phantom", "key %d: element %d in the final list was appended by no committed transaction", k, e)
			} else if appendKey[e] != k {
				add("phantom", "key %d: element %d was appended to key %d", k, e, appendKey[e])
			}
		}
		pos[k] = l
	}
	for e, id := range appender {
		if !slices.Contains(final[appendKey[e]], e) {
			add("lost", "key %d: transaction %d's committed append of %d is not in the final list", appendKey[e], id, e)
		}
	}
	for _, t := range committed {
		known := map[int][]int64{} // key: the list as this transaction last saw it, plus its appends since
		mine := map[int][]int64{}  // key: own appends with no read of the key before them
		readKey := map[int]bool{}  // key: read by this transaction already
		for _, op := range t.Ops {
			if !op.IsRead() {
				if readKey[op.Key] {
					known[op.Key] = append(known[op.Key], op.Append)
				} else {
					mine[op.Key] = append(mine[op.Key], op.Append)
				}
				continue
			}
			fl := final[op.Key]
			if len(op.Read) > len(fl) || !slices.Equal(op.Read, fl[:len(op.Read)]) {
				add("incompatible", "key %d: transaction %d read %v, not a prefix of the final list %v", op.Key, t.ID, short(op.Read), short(fl))
			}
			for _, e := range op.Read {
				if _, ok := appender[e]; !ok {
					add("phantom", "key %d: transaction %d read element %d, which no committed transaction appended", op.Key, t.ID, e)
				}
			}
			switch {
			case readKey[op.Key] && !slices.Equal(op.Read, known[op.Key]):
				add("internal", "key %d: transaction %d read %v after it had seen and written %v", op.Key, t.ID, short(op.Read), short(known[op.Key]))
			case !readKey[op.Key] && len(mine[op.Key]) > 0 && !hasSuffix(op.Read, mine[op.Key]):
				add("internal", "key %d: transaction %d read %v without its own appends %v at the end", op.Key, t.ID, short(op.Read), mine[op.Key])
			}
			readKey[op.Key] = true
			known[op.Key] = slices.Clone(op.Read)
			mine[op.Key] = nil
		}
	}
	if c := findCycle(committed, final, appender); c != nil {
		add("cycle", "transactions %v depend on each other in a cycle", c)
	}
	return out
}

// findCycle builds the dependency graph of the committed transactions and
// returns the ids of one cycle in it, or nil.
func findCycle(committed []Txn, final map[int][]int64, appender map[int64]int) []int {
	edges := map[int]map[int]bool{}
	edge := func(a, b int) {
		if a == b {
			return
		}
		if edges[a] == nil {
			edges[a] = map[int]bool{}
		}
		edges[a][b] = true
	}
	// ww: consecutive appends of a key.
	for _, l := range final {
		for i := 1; i < len(l); i++ {
			a, okA := appender[l[i-1]]
			b, okB := appender[l[i]]
			if okA && okB {
				edge(a, b)
			}
		}
	}
	// wr: the appender of the last element a read saw precedes the reader;
	// rw: the reader precedes the appender of the first element it missed.
	for _, t := range committed {
		for _, op := range t.Ops {
			if !op.IsRead() {
				continue
			}
			fl := final[op.Key]
			n := len(op.Read)
			if n > len(fl) || !slices.Equal(op.Read, fl[:n]) {
				continue // reported as incompatible
			}
			if n > 0 {
				if w, ok := appender[fl[n-1]]; ok {
					edge(w, t.ID)
				}
			}
			if n < len(fl) {
				if w, ok := appender[fl[n]]; ok {
					edge(t.ID, w)
				}
			}
		}
	}
	// Depth-first search for a back edge, iteratively (histories are long).
	const (
		white = iota
		grey
		black
	)
	color := map[int]int{}
	parent := map[int]int{}
	nodes := make([]int, 0, len(edges))
	for n := range edges {
		nodes = append(nodes, n)
	}
	sort.Ints(nodes)
	for _, root := range nodes {
		if color[root] != white {
			continue
		}
		type frame struct {
			n    int
			next []int
		}
		stack := []frame{{root, successors(edges[root])}}
		color[root] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if len(top.next) == 0 {
				color[top.n] = black
				stack = stack[:len(stack)-1]
				continue
			}
			m := top.next[0]
			top.next = top.next[1:]
			switch color[m] {
			case white:
				color[m], parent[m] = grey, top.n
				stack = append(stack, frame{m, successors(edges[m])})
			case grey: // back edge top.n → m: the cycle is m … top.n
				cycle := []int{top.n}
				for n := top.n; n != m; {
					n = parent[n]
					cycle = append(cycle, n)
				}
				slices.Reverse(cycle)
				return cycle
			}
		}
	}
	return nil
}

func successors(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

func hasSuffix(l, suffix []int64) bool {
	return len(l) >= len(suffix) && slices.Equal(l[len(l)-len(suffix):], suffix)
}

// short formats a list, eliding the middle of a long one.
func short(l []int64) string {
	if len(l) <= 8 {
		return fmt.Sprint(l)
	}
	var b strings.Builder
	fmt.Fprint(&b, l[:3])
	fmt.Fprintf(&b, " … %d more … ", len(l)-6)
	fmt.Fprint(&b, l[len(l)-3:])
	return b.String()
}
