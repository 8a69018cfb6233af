package chart

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

func TestBarsAndLines(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		draw func(path string) error
	}{
		{"bars", func(p string) error {
			return Bars(p, Labels{Title: "t", Y: "ratio"}, []string{"a", "b"},
				[]Series{{"direct", []float64{1, 2}}, {"proxy", []float64{0.5, 1.5}}}, Ref{Value: 0.6, Label: "target"})
		}},
		{"lines", func(p string) error {
			return Lines(p, Labels{Title: "t", X: "s", Y: "MB"},
				[]Line{{Name: "fast", X: []float64{0, 1, 2}, Y: []float64{10, 20, 15}}}, Ref{Value: 32, Label: "limit"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".png")
			if err := tt.draw(path); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, pngMagic) || len(b) < 1000 {
				t.Fatalf("%s is not a PNG (%d bytes)", path, len(b))
			}
		})
	}
}

func TestShapeErrors(t *testing.T) {
	dir := t.TempDir()
	err := Bars(filepath.Join(dir, "x.png"), Labels{}, []string{"a"}, []Series{{"s", []float64{1, 2}}})
	if !errors.Is(err, ErrShape) {
		t.Fatalf("Bars: err = %v, want ErrShape", err)
	}
	err = Lines(filepath.Join(dir, "y.png"), Labels{}, []Line{{Name: "l", X: []float64{1}, Y: nil}})
	if !errors.Is(err, ErrShape) {
		t.Fatalf("Lines: err = %v, want ErrShape", err)
	}
}
