package main

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// floorMS keeps intervals without waits (or with sub-µs ones) drawable on
// the log axis.
const floorMS = 0.01

// plotQuantiles draws p50 and p99 of the lock wait per rule, in ms on a log
// axis, with the hot phase shaded.
func plotQuantiles(path string, pts []point, phase time.Duration) error {
	p := plot.New()
	p.Title.Text = "lockproxy lock wait per 1s scrape (histogram_quantile over lockproxy_lock_wait_seconds)"
	p.X.Label.Text = "seconds since the workload started (shaded: most transactions on one row)"
	p.Y.Label.Text = "lock wait (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.X.Tick.Marker = everyFiveSeconds{}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	ymax := 1.0
	byRule := map[string][2]plotter.XYs{}
	var rules []string
	for _, pt := range pts {
		v, ok := byRule[pt.rule]
		if !ok {
			rules = append(rules, pt.rule)
		}
		for i, q := range []float64{pt.p50, pt.p99} {
			if math.IsNaN(q) {
				continue
			}
			ms := math.Max(q*1000, floorMS)
			ymax = math.Max(ymax, ms)
			v[i] = append(v[i], plotter.XY{X: pt.t, Y: ms})
		}
		byRule[pt.rule] = v
	}
	if err := shade(p, phase, ymax*2); err != nil {
		return err
	}
	colors := []color.Color{color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255}}
	for _, r := range rules {
		for i, name := range []string{"p50", "p99"} {
			l, err := plotter.NewLine(byRule[r][i])
			if err != nil {
				return err
			}
			l.Color, l.Width = colors[i], vg.Points(2)
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s rule=%s", name, r), l)
		}
	}
	p.Y.Min, p.Y.Max = floorMS, ymax*2
	return p.Save(24*vg.Centimeter, 12*vg.Centimeter, path)
}

// shade draws the hot phase as a grey band.
func shade(p *plot.Plot, phase time.Duration, top float64) error {
	a, b := phase.Seconds(), 2*phase.Seconds()
	poly, err := plotter.NewPolygon(plotter.XYs{{X: a, Y: floorMS}, {X: b, Y: floorMS}, {X: b, Y: top}, {X: a, Y: top}})
	if err != nil {
		return err
	}
	poly.Color = color.Gray{Y: 230}
	poly.LineStyle = draw.LineStyle{Width: 0}
	p.Add(poly)
	return nil
}

// writeCSV keeps the numbers behind the chart.
func writeCSV(path string, pts []point) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"t_seconds", "rule", "p50_seconds", "p99_seconds", "acquired_per_second", "timeouts_per_second", "waiters"})
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
	for _, pt := range pts {
		_ = w.Write([]string{g(pt.t), pt.rule, g(pt.p50), g(pt.p99), g(pt.acquired), g(pt.out), g(pt.waiters)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// everyFiveSeconds labels the time axis every 5s.
type everyFiveSeconds struct{}

// Ticks implements plot.Ticker.
func (everyFiveSeconds) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for x := math.Ceil(lo); x <= hi; x++ {
		t := plot.Tick{Value: x}
		if int(x)%5 == 0 {
			t.Label = strconv.Itoa(int(x))
		}
		ts = append(ts, t)
	}
	return ts
}
