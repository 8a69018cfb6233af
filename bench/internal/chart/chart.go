package chart

import (
	"errors"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ErrShape is returned when series and categories do not line up.
var ErrShape = errors.New("chart: series do not match categories")

// Series is one named set of bar heights, one per category.
type Series struct {
	Name   string
	Values []float64
}

// Line is one named polyline.
type Line struct {
	Name string
	X, Y []float64
}

// Ref is a horizontal reference line such as a target.
type Ref struct {
	Value float64
	Label string
}

// Labels are a chart's title and axis labels.
type Labels struct {
	Title, X, Y string
}

// Bars writes a grouped bar chart PNG to path: one group per category, one
// bar per series in each group, and the reference lines across.
func Bars(path string, l Labels, categories []string, series []Series, refs ...Ref) error {
	p := newPlot(l)
	const groupWidth = 60.0
	w := vg.Points(groupWidth / float64(max(len(series), 1)))
	for i, s := range series {
		if len(s.Values) != len(categories) {
			return fmt.Errorf("%w: %s has %d values for %d categories", ErrShape, s.Name, len(s.Values), len(categories))
		}
		b, err := plotter.NewBarChart(plotter.Values(s.Values), w)
		if err != nil {
			return fmt.Errorf("chart: %s: %w", s.Name, err)
		}
		b.LineStyle.Width = vg.Length(0)
		b.Color = plotutil.Color(i)
		b.Offset = w * vg.Length(float64(i)-float64(len(series)-1)/2)
		p.Add(b)
		p.Legend.Add(s.Name, b)
	}
	p.Legend.Top = true
	top := 0.0
	for _, s := range series {
		for _, v := range s.Values {
			top = max(top, v)
		}
	}
	p.Y.Max = top * 1.3 // room for the legend above the highest bar
	p.NominalX(categories...)
	if len(categories) > 2 {
		p.X.Tick.Label.Rotation = math.Pi / 6
		p.X.Tick.Label.XAlign = draw.XRight
		p.X.Tick.Label.YAlign = draw.YTop
	}
	p.Y.Min = 0
	if err := addRefs(p, float64(len(categories))-0.5, refs); err != nil {
		return err
	}
	width := vg.Length(max(6, 0.9*float64(len(categories)))) * vg.Inch
	return save(p, width, 5*vg.Inch, path)
}

// Lines writes a line chart PNG to path.
func Lines(path string, l Labels, lines []Line, refs ...Ref) error {
	p := newPlot(l)
	xmax := 0.0
	for i, ln := range lines {
		if len(ln.X) != len(ln.Y) {
			return fmt.Errorf("%w: %s has %d x and %d y", ErrShape, ln.Name, len(ln.X), len(ln.Y))
		}
		xys := make(plotter.XYs, len(ln.X))
		for j := range ln.X {
			xys[j].X, xys[j].Y = ln.X[j], ln.Y[j]
			xmax = max(xmax, ln.X[j])
		}
		pl, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("chart: %s: %w", ln.Name, err)
		}
		pl.Color = plotutil.Color(i)
		pl.Width = vg.Points(1.5)
		p.Add(pl)
		p.Legend.Add(ln.Name, pl)
	}
	p.Legend.Top = true
	p.Y.Min = 0
	if err := addRefs(p, xmax, refs); err != nil {
		return err
	}
	return save(p, 8*vg.Inch, 4*vg.Inch, path)
}

func newPlot(l Labels) *plot.Plot {
	p := plot.New()
	p.Title.Text = l.Title
	p.X.Label.Text = l.X
	p.Y.Label.Text = l.Y
	p.Add(plotter.NewGrid())
	return p
}

// addRefs draws each reference as a dashed line from x=-0.5 to xmax.
func addRefs(p *plot.Plot, xmax float64, refs []Ref) error {
	refColors := []color.Color{color.RGBA{R: 200, A: 255}, color.RGBA{R: 90, G: 90, B: 90, A: 255}}
	for i, r := range refs {
		l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: r.Value}, {X: xmax, Y: r.Value}})
		if err != nil {
			return fmt.Errorf("chart: reference %s: %w", r.Label, err)
		}
		l.Color = refColors[i%len(refColors)]
		l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(r.Label, l)
		p.Y.Max = max(p.Y.Max, r.Value*1.35)
	}
	return nil
}

func save(p *plot.Plot, w, h vg.Length, path string) error {
	if err := p.Save(w, h, path); err != nil {
		return fmt.Errorf("chart: save %s: %w", path, err)
	}
	return nil
}
