package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWarmPoolSeries: the warm pool's series as a scraper reads them.
func TestWarmPoolSeries(t *testing.T) {
	m := New()
	m.WarmPool(func() (int, int, uint64, uint64) { return 2, 1, 5, 3 })
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`remoted_warm_containers{state="ready"} 2`,
		`remoted_warm_containers{state="creating"} 1`,
		`remoted_warm_claims_total{result="claimed"} 5`,
		`remoted_warm_claims_total{result="missed"} 3`,
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("no %q in:\n%s", want, body)
		}
	}
}
