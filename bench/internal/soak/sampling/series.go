package sampling

import "sort"

// LastOf returns up to n most recent samples of instance i in phase, the
// most recent first.
func LastOf(samples []Sample, phase string, i, n int) []Sample {
	var out []Sample
	for k := len(samples) - 1; k >= 0 && len(out) < n; k-- {
		if samples[k].Phase == phase && samples[k].Instance == i {
			out = append(out, samples[k])
		}
	}
	return out
}

// MedianGauge is the median of gauge g over samples (0 for none).
func MedianGauge(samples []Sample, g string) float64 {
	if len(samples) == 0 {
		return 0
	}
	xs := make([]float64, len(samples))
	for i, s := range samples {
		xs[i] = s.Gauges[g]
	}
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// MeanLoad averages over samples the host's busy share (0..1, from
// instance 0's samples) and each of the instances' CPU (% of one core).
func MeanLoad(samples []Sample, instances int) (float64, []float64) {
	var busy float64
	var nb int
	cpu := make([]float64, instances)
	n := make([]int, instances)
	for _, s := range samples {
		if s.Instance == 0 {
			busy += s.HostBusy
			nb++
		}
		if s.Instance < instances {
			cpu[s.Instance] += s.CPUPct
			n[s.Instance]++
		}
	}
	if nb > 0 {
		busy /= float64(nb)
	}
	for i := range cpu {
		if n[i] > 0 {
			cpu[i] /= float64(n[i])
		}
	}
	return busy, cpu
}
