package listappend

import (
	"slices"
	"testing"
)

func r(k int, l ...int64) Op { return Op{Key: k, Read: l} }
func a(k int, e int64) Op    { return Op{Key: k, Append: e} }

func kinds(as []Anomaly) []string {
	var out []string
	for _, x := range as {
		if !slices.Contains(out, x.Kind) {
			out = append(out, x.Kind)
		}
	}
	slices.Sort(out)
	return out
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name      string
		committed []Txn
		final     map[int][]int64
		want      []string
	}{
		{"serial read-then-append", []Txn{
			{1, []Op{r(1), a(1, 10)}},
			{2, []Op{r(1, 10), a(1, 20), r(2)}},
			{3, []Op{r(1, 10, 20), r(2)}},
		}, map[int][]int64{1: {10, 20}, 2: {}}, nil},
		{"lost update", []Txn{
			{1, []Op{r(1), a(1, 10)}},
			{2, []Op{r(1), a(1, 20)}},
		}, map[int][]int64{1: {20}}, []string{"lost"}},
		{"write skew", []Txn{
			{1, []Op{r(1), r(2), a(2, 10)}},
			{2, []Op{r(1), r(2), a(1, 20)}},
		}, map[int][]int64{1: {20}, 2: {10}}, []string{"cycle"}},
		{"stale read of two keys", []Txn{
			{1, []Op{r(1), a(1, 10), r(2), a(2, 11)}},
			{2, []Op{r(1, 10), r(2)}}, // saw T1's first append, missed its second
		}, map[int][]int64{1: {10}, 2: {11}}, []string{"cycle"}},
		{"incompatible order", []Txn{
			{1, []Op{r(1), a(1, 10)}},
			{2, []Op{r(1, 10), a(1, 20)}},
			{3, []Op{r(1, 20, 10)}},
		}, map[int][]int64{1: {10, 20}}, []string{"incompatible"}},
		{"aborted write visible", []Txn{
			{1, []Op{r(1), a(1, 10)}},
		}, map[int][]int64{1: {10, 99}}, []string{"phantom"}},
		{"aborted write read", []Txn{
			{1, []Op{r(1), a(1, 10)}},
			{2, []Op{r(1, 10, 99)}},
		}, map[int][]int64{1: {10}}, []string{"incompatible", "phantom"}},
		{"duplicate", []Txn{
			{1, []Op{r(1), a(1, 10)}},
		}, map[int][]int64{1: {10, 10}}, []string{"duplicate"}},
		{"own write not seen", []Txn{
			{1, []Op{r(1), a(1, 10), r(1)}},
		}, map[int][]int64{1: {10}}, []string{"internal"}},
		{"blind append not at the end of the next read", []Txn{
			{1, []Op{r(1), a(1, 10)}},
			{2, []Op{a(1, 20), r(1, 20, 10)}},
		}, map[int][]int64{1: {20, 10}}, []string{"cycle", "internal"}},
		{"append to the wrong key", []Txn{
			{1, []Op{r(1), a(1, 10)}},
		}, map[int][]int64{1: {}, 2: {10}}, []string{"lost", "phantom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(tc.committed, tc.final)
			if k := kinds(got); !slices.Equal(k, tc.want) {
				t.Errorf("anomalies %v, want kinds %v", got, tc.want)
			}
		})
	}
}

// TestCheckLongSerialHistory: a long serial history is clean and checked
// without recursion (the search is iterative: its dependency chain is as
// long as the history).
func TestCheckLongSerialHistory(t *testing.T) {
	const n = 5000
	list := make([]int64, n)
	var txns []Txn
	for i := 1; i <= n; i++ {
		list[i-1] = int64(i)
		txns = append(txns, Txn{i, []Op{r(1, list[:i-1]...), a(1, int64(i))}})
	}
	if got := Check(txns, map[int][]int64{1: list}); len(got) != 0 {
		t.Fatalf("anomalies in a serial history: %v", got[:min(len(got), 3)])
	}
}
