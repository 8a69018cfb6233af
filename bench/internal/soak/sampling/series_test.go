package sampling

import "testing"

func TestLastOfMedian(t *testing.T) {
	var ss []Sample
	for i, v := range []float64{5, 1, 9, 3, 7} {
		ss = append(ss, Sample{Phase: PhaseLoad, Instance: i % 2, Gauges: map[string]float64{"go_goroutines": v}})
	}
	last := LastOf(ss, PhaseLoad, 0, 3) // values 7, 9, 5 (instance 0)
	if len(last) != 3 || MedianGauge(last, "go_goroutines") != 7 {
		t.Fatalf("LastOf/median = %v / %v", last, MedianGauge(last, "go_goroutines"))
	}
	if MedianGauge(LastOf(ss, PhaseLoad, 1, 3), "go_goroutines") != 2 {
		t.Fatal("median of an even count")
	}
	if MedianGauge(nil, "go_goroutines") != 0 {
		t.Fatal("median of nothing")
	}
}
