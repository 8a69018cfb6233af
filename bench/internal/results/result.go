package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ErrNoResults is returned by LoadAll when the directory holds no result.
var ErrNoResults = errors.New("results: no result files")

// Result is what one scenario run produced. It is plain data, safe to copy;
// it is not safe for concurrent mutation.
type Result struct {
	Scenario string    `json:"scenario"`
	Mode     string    `json:"mode"` // quick | full
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Command  string    `json:"command"`
	Machine  Machine   `json:"machine"`
	// Targets are the figures the scenario is shown against. They are
	// reported, never asserted: Met says how this run compared.
	Targets []Target `json:"targets"`
	// Data is the scenario's own figures; its shape belongs to the scenario.
	Data json.RawMessage `json:"data"`
}

// Target is one goal a scenario is measured against, e.g. "proxy/direct qps
// at 8 threads >= 0.60".
type Target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

// SetData stores v as the result's Data.
func (r *Result) SetData(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("results: encode %s data: %w", r.Scenario, err)
	}
	r.Data = b
	return nil
}

// DecodeData decodes the result's Data into v.
func (r *Result) DecodeData(v any) error {
	if err := json.Unmarshal(r.Data, v); err != nil {
		return fmt.Errorf("results: decode %s data: %w", r.Scenario, err)
	}
	return nil
}

// Path is where the result of scenario lives under dir.
func Path(dir, scenario string) string {
	return filepath.Join(dir, scenario+".json")
}

// Save writes r to dir/<scenario>.json, replacing an older run.
func Save(dir string, r *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("results: encode %s: %w", r.Scenario, err)
	}
	return os.WriteFile(Path(dir, r.Scenario), append(b, '\n'), 0o644)
}

// Load reads one result file.
func Load(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("results: %s: %w", path, err)
	}
	if r.Scenario == "" {
		return nil, fmt.Errorf("results: %s: no scenario name", path)
	}
	return &r, nil
}

// LoadAll reads every *.json result in dir, sorted by scenario name.
func LoadAll(dir string) ([]*Result, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var out []*Result
	for _, p := range paths {
		r, err := Load(p)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoResults, dir)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Scenario < out[j].Scenario })
	return out, nil
}

// Median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Slug turns a label into a file-name-safe word.
func Slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}
