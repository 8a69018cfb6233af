package results

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want float64
	}{
		{"empty", nil, 0},
		{"one", []float64{3}, 3},
		{"odd unsorted", []float64{5, 1, 3}, 3},
		{"even", []float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]float64(nil), tt.in...)
			if got := Median(tt.in); got != tt.want {
				t.Fatalf("Median(%v) = %v, want %v", tt.in, got, tt.want)
			}
			for i := range in {
				if in[i] != tt.in[i] {
					t.Fatalf("Median modified its input: %v", tt.in)
				}
			}
		})
	}
}

func TestSaveLoadAll(t *testing.T) {
	dir := t.TempDir()
	type data struct{ QPS float64 }
	for _, name := range []string{"zeta", "alpha"} {
		r := &Result{Scenario: name, Mode: "quick", Targets: []Target{{Name: "x", Want: ">= 1", Got: "2", Met: true}}}
		if err := r.SetData(data{QPS: 42}); err != nil {
			t.Fatal(err)
		}
		if err := Save(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	all, err := LoadAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Scenario != "alpha" || all[1].Scenario != "zeta" {
		t.Fatalf("LoadAll order = %+v", all)
	}
	var d data
	if err := all[0].DecodeData(&d); err != nil || d.QPS != 42 {
		t.Fatalf("DecodeData = %+v, %v", d, err)
	}
	if !all[0].Targets[0].Met {
		t.Fatalf("target lost: %+v", all[0].Targets)
	}
}

func TestLoadAllErrors(t *testing.T) {
	t.Run("empty dir", func(t *testing.T) {
		if _, err := LoadAll(t.TempDir()); err == nil {
			t.Fatal("want ErrNoResults")
		}
	})
	t.Run("no scenario", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "x.json"), []byte(`{"mode":"full"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadAll(dir); err == nil {
			t.Fatal("want an error for a result without a scenario")
		}
	})
}

func TestSlug(t *testing.T) {
	if got := Slug("oltp_point_select / 8 thr"); got != "oltp-point-select---8-thr" {
		t.Fatalf("Slug = %q", got)
	}
}
