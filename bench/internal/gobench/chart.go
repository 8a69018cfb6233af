package gobench

import (
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// drawLocks writes the lock backends' bar chart: per backend the
// uncontended and hot-key figures in µs, on a log scale (memlock and the
// networked backends are three orders of magnitude apart). gonum's bars
// start at zero, which a log axis cannot show, so the bars are drawn as
// decades above the lowest decade on a linear axis labelled in µs.
func drawLocks(path string, bs []Bench) error {
	names := backends(bs)
	us := [2][]float64{}
	lo := math.Inf(1)
	for _, be := range names {
		u, h := lockPair(bs, be)
		for i, x := range []Bench{u, h} {
			v := x.Ns() / 1e3
			us[i] = append(us[i], v)
			if v > 0 {
				lo = min(lo, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo = 1
	}
	base := math.Floor(math.Log10(lo))
	p := plot.New()
	p.Title.Text = "lock backends: median time per operation"
	p.Y.Label.Text = "time per operation (log scale)"
	p.Add(plotter.NewGrid())
	w := vg.Points(22)
	top := 1.0
	for i, label := range []string{"uncontended acquire+release", "hot-key handoff, per grant"} {
		vals := make(plotter.Values, len(us[i]))
		for j, v := range us[i] {
			if v > 0 {
				vals[j] = math.Log10(v) - base
				top = max(top, vals[j])
			}
		}
		bar, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return fmt.Errorf("gobench: chart: %w", err)
		}
		bar.LineStyle.Width = 0
		bar.Color = plotutil.Color(i)
		bar.Offset = w * vg.Length(float64(i)-0.5)
		p.Add(bar)
		p.Legend.Add(label, bar)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(8)
	p.Y.Min, p.Y.Max = 0, math.Ceil(top)+0.6 // room for the legend
	p.Y.Tick.Marker = decades{base: base}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5 // whole bars at both ends
	if err := p.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("gobench: chart: save %s: %w", path, err)
	}
	return nil
}

// decades labels a log10-above-base axis in µs.
type decades struct{ base float64 }

// Ticks implements plot.Ticker.
func (d decades) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for k := math.Ceil(lo); k <= hi; k++ {
		ts = append(ts, plot.Tick{Value: k, Label: DecadeLabel(k + d.base)})
		for m := 2.0; m < 10 && k+math.Log10(m) <= hi; m++ {
			ts = append(ts, plot.Tick{Value: k + math.Log10(m)})
		}
	}
	return ts
}

// DecadeLabel names 10^e µs: "1 µs", "100 µs", "10 ms", "0.1 µs".
func DecadeLabel(e float64) string {
	us := math.Pow(10, e)
	switch {
	case us >= 1e3:
		return strconv.FormatFloat(us/1e3, 'f', -1, 64) + " ms"
	default:
		return strconv.FormatFloat(us, 'f', -1, 64) + " µs"
	}
}
