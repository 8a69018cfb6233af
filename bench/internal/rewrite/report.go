package rewrite

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lockproxy/lockproxy/bench/internal/chart"
	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/results"
)

func targets(d Data) []results.Target {
	var out []results.Target
	var lost int64
	for _, a := range d.Arms {
		if a.Instances == 0 {
			continue
		}
		lost = max(lost, a.LostMax)
		out = append(out, results.Target{
			Name: "decrements/s, " + a.Name + " / atomic direct", Want: fmt.Sprintf("≥ %.1f×", TargetRatio),
			Got: contend.X(a.DoneRatio) + floorNote(d.Arms, a), Met: a.DoneRatio >= TargetRatio,
		})
	}
	return append(out, results.Target{Name: "lost updates through lockproxy", Want: "0", Got: fmt.Sprint(lost), Met: lost == 0})
}

// protoOf is the protocol suffix of an arm name ("text" or "prepared").
func protoOf(name string) bool { return strings.HasSuffix(name, ", prepared") }

// floorNote names, next to a target's figure, what the two statements
// lockproxy sends reached through the bare Go relay in the same rounds.
func floorNote(arms []contend.Result, a contend.Result) string {
	p, ok := contend.Find(arms, PairRelayName(protoOf(a.Name)))
	if !ok {
		return ""
	}
	return fmt.Sprintf(" (the statements lockproxy sends, via bare Go relay: %s)", contend.X(p.DoneRatio))
}

// floorLines say, per protocol, what the direct and relay arms reached and
// where lockproxy stands against them; empty for results without them.
func floorLines(d Data) string {
	var b strings.Builder
	for _, a := range d.Arms {
		if a.Instances == 0 {
			continue
		}
		prepared := protoOf(a.Name)
		pr, okPR := contend.Find(d.Arms, PairRelayName(prepared))
		pd, okPD := contend.Find(d.Arms, PairName(prepared))
		at, okA := contend.Find(d.Arms, AtomicRelayName(prepared))
		if !okPR || !okPD || !okA {
			continue
		}
		fmt.Fprintf(&b, "- %s: the two statements lockproxy sends (the SELECT, then `UPDATE ... SET stock = stock - 1 WHERE sku_id = 1 AND stock - 1 >= 0`) reached **%s** of the atomic UPDATE sent directly, "+
			"and **%s** through the bare Go relay (the floor for this rewrite through any proxy on this host); the atomic UPDATE alone through the relay reached %s. "+
			"lockproxy's rewrite reached **%s**, **%s** of the relay floor (decrements/s, paired rounds).\n",
			proto(prepared), contend.X(pd.DoneRatio), contend.X(pr.DoneRatio), contend.X(at.DoneRatio), contend.X(a.DoneRatio),
			contend.X(contend.PairedRatio(a, pr, contend.Run.DonePerSec)))
	}
	if b.Len() == 0 {
		return ""
	}
	return "**The floor on this host** (`bench/cmd/relay`: accept, dial, `io.Copy` both ways, nothing parsed):\n\n" + b.String() + "\n"
}

// Report implements scenario.Scenario.
func (s *Scenario) Report(r *results.Result, plotDir, relDir string) (string, error) {
	var d Data
	if err := r.DecodeData(&d); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d clients loop on one row with a stock that cannot run out, %.0f s per run, %d interleaved round(s), protocols: %s. "+
		"The read-then-write takes a connection from the pool (`db.Conn`), sends `SELECT stock FROM sku_stock WHERE sku_id = 1` and `UPDATE sku_stock SET stock = <read-1> WHERE sku_id = 1` on it, "+
		"and counts a decrement when the UPDATE changed the row (through lockproxy the rule, `lock: []` and `rewrite: {column: stock, mode: delta, min: 0}`, "+
		"turns it into `SET stock = stock + (new - old) ... AND stock + (new - old) >= 0`). The baseline is one statement, "+
		"`UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1 AND stock > 0`, sent directly: the read-then-write costs two statements per decrement where the baseline costs one. "+
		"*decrements/s* counts UPDATEs that changed the row; *lost* = decrements counted − units gone from the stock. Ratios are medians of per-round ratios against the atomic UPDATE of the same protocol.\n\n",
		d.Clients, d.Seconds, d.Rounds, strings.Join(d.Protos, ", "))
	b.WriteString(contend.Table(d.Arms, "decrements"))
	b.WriteString(floorLines(d))
	b.WriteString("| arm | lost updates (worst round) |\n|---|--:|\n")
	for _, a := range d.Arms {
		fmt.Fprintf(&b, "| %s | %d |\n", a.Name, a.LostMax)
	}
	b.WriteString("\n")
	b.WriteString(contend.Errors(d.Arms))
	b.WriteString("CPU per decrement (median over rounds):\n\n")
	b.WriteString(contend.CPUTable(d.Arms, "decrement"))
	name := "rewrite-ratio.png"
	var labels []string
	ratio := chart.Series{Name: "decrements/s / atomic UPDATE direct"}
	for _, a := range d.Arms {
		if a.Baseline != "" {
			labels = append(labels, a.Name)
			ratio.Values = append(ratio.Values, a.DoneRatio)
		}
	}
	err := chart.Bars(filepath.Join(plotDir, name), chart.Labels{Title: "hot row decrements: throughput / atomic UPDATE directly", Y: "ratio"},
		labels, []chart.Series{ratio}, chart.Ref{Value: TargetRatio, Label: fmt.Sprintf("target %.1f", TargetRatio)}, chart.Ref{Value: 1, Label: "same as atomic direct"})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "![%s](%s)\n\n", name, filepath.ToSlash(filepath.Join(relDir, name)))
	return b.String(), nil
}
