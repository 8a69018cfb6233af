package contend

import (
	"fmt"

	"github.com/lockproxy/lockproxy/bench/internal/results"
)

// ProxiedLosses is the worst lost-update count (or drift of a conserved
// total) of a run and the errors, summed, of the arms that ran through
// lockproxy; a direct arm's own count is the unsafe code's, not
// lockproxy's.
func ProxiedLosses(rs []Result) (lost int64, errs int) {
	for _, a := range rs {
		if a.Instances > 0 {
			lost, errs = max(lost, a.LostMax), errs+a.Errors
		}
	}
	return lost, errs
}

// SafetyTargets are the targets every timed scenario through lockproxy
// has: no update lost, no error.
func SafetyTargets(rs []Result) []results.Target {
	lost, errs := ProxiedLosses(rs)
	return []results.Target{
		{Name: "lost updates through lockproxy", Want: "0", Got: fmt.Sprint(lost), Met: lost == 0},
		{Name: "errors through lockproxy", Want: "0", Got: fmt.Sprint(errs), Met: errs == 0},
	}
}
