package sampling

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// WriteCSV writes the series to path, creating its directory: elapsed_s,
// instance, phase, every gauge, hwm_bytes, cpu_pct, host_busy_pct.
func WriteCSV(path string, samples []Sample) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	if err := renderCSV(f, samples); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}

// renderCSV writes the CSV of samples to w.
func renderCSV(w io.Writer, samples []Sample) error {
	cw := csv.NewWriter(w)
	head := append([]string{"elapsed_s", "instance", "phase"}, Gauges...)
	head = append(head, "hwm_bytes", "cpu_pct", "host_busy_pct")
	if err := cw.Write(head); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	for _, s := range samples {
		row := []string{strconv.FormatFloat(s.Elapsed.Seconds(), 'f', 1, 64), strconv.Itoa(s.Instance), s.Phase}
		for _, g := range Gauges {
			row = append(row, strconv.FormatFloat(s.Gauges[g], 'f', -1, 64))
		}
		row = append(row, strconv.FormatUint(s.HWM, 10),
			strconv.FormatFloat(s.CPUPct, 'f', 1, 64), strconv.FormatFloat(100*s.HostBusy, 'f', 1, 64))
		if err := cw.Write(row); err != nil {
			return fmt.Errorf("csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("csv: %w", err)
	}
	return nil
}
