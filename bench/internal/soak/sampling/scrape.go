package sampling

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Gauges are the series the soak samples from each instance's /metrics, in
// CSV column order. A scrape that lacks one fails.
var Gauges = []string{
	"go_goroutines",
	"process_open_fds",
	"process_resident_memory_bytes",
	"go_memstats_heap_inuse_bytes",
	"lockproxy_client_connections",
	"lockproxy_locks_held",
	"lockproxy_lock_waiters",
}

// scraper reads one instance's /metrics. A fresh connection per scrape
// (no keep-alive) makes every reading count the same one admin connection.
type scraper struct {
	client *http.Client
}

// newScraper returns a scraper with a 5 s timeout per scrape.
func newScraper() *scraper {
	return &scraper{client: &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true},
	}}
}

// scrape fetches and parses http://adminAddr/metrics.
func (s *scraper) scrape(ctx context.Context, adminAddr string) (Exposition, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+adminAddr+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", adminAddr, err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", adminAddr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics %s: HTTP %d", adminAddr, resp.StatusCode)
	}
	m, err := ParseExposition(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics %s: %w", adminAddr, err)
	}
	for _, g := range Gauges {
		if !m.Has(g) {
			return nil, fmt.Errorf("metrics %s: %s not exposed", adminAddr, g)
		}
	}
	return m, nil
}
