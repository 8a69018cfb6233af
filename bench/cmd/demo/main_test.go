package main

import (
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
)

// TestReport: the table shows each sale's anomalies from its own figures,
// and the verdict tells a harmful direct run from a harmless one.
func TestReport(t *testing.T) {
	o := options{buyers: 200, stock: 50}
	direct := sale{initial: 50, state: contend.State{Orders: 200, Stock: 43}}
	via := sale{initial: 50, state: contend.State{Orders: 50, Stock: 0}, proxied: true,
		locks: contend.LockMetrics{WaitCount: 200, WaitSum: 2}}
	out := report(o, [2]sale{direct, via})
	for _, want := range []string{
		"oversold units         150                    0\n",
		"lost updates           193                    0\n",
		"lock waits (metrics)   none (no locks)        200, mean 10.0 ms\n",
		"150 units oversold, 193 updates lost",
		"sold exactly 50",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	harmless := sale{initial: 50, state: contend.State{Orders: 50, Stock: 0}}
	if out := report(o, [2]sale{harmless, via}); !strings.Contains(out, "happened to interleave without harm") {
		t.Errorf("a direct run without anomalies is reported as harmful:\n%s", out)
	}
}
