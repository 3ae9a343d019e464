package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// metrics is one scrape of a Prometheus text endpoint: each series (its
// name and labels as written) and its value.
type metrics map[string]float64

// scrape reads url's Prometheus text exposition.
func scrape(url string) (metrics, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	m, err := parseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return m, nil
}

// scrapeRetry is scrape tried three times: an overloaded process may miss
// one scrape's deadline.
func scrapeRetry(url string) (metrics, error) {
	var errs []error
	for range 3 {
		m, err := scrape(url)
		if err == nil {
			return m, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// parseMetrics reads the text exposition format: comments are skipped, a
// sample is "series value [timestamp]".
func parseMetrics(r io.Reader) (metrics, error) {
	m := metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// The value follows the series; labels may hold spaces, so the
		// series ends at the closing brace when there is one.
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			end = strings.IndexByte(line, ' ') - 1
		}
		if end < 0 || end+1 >= len(line) {
			return nil, fmt.Errorf("unreadable sample %q", line)
		}
		f := strings.Fields(line[end+1:])
		if len(f) == 0 {
			return nil, fmt.Errorf("sample %q has no value", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("sample %q: %w", line, err)
		}
		m[line[:end+1]] = v
	}
	return m, sc.Err()
}

// sum adds every series of metric name whose labels contain each of the
// label pairs given (`method="Txn"`).
func (m metrics) sum(name string, labels ...string) float64 {
	var t float64
	for series, v := range m {
		rest, ok := strings.CutPrefix(series, name)
		if !ok || rest != "" && rest[0] != '{' {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				match = false
				break
			}
		}
		if match {
			t += v
		}
	}
	return t
}
