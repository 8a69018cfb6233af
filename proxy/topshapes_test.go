package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestTopShapesCountsAndEvicts: counts per rule, outcome, reason and
// shape are exact while a rule and outcome has at most shapeTracked
// shapes; past that a new shape replaces the least counted one, the
// heavy shapes stay, and no more than shapeTop series per rule and
// outcome are ever exported.
func TestTopShapesCountsAndEvicts(t *testing.T) {
	ts := newTopShapes()
	for range 5 {
		ts.add("r", wouldRefuse, refuseUnkeyed, "update `t` set `a` = ?")
	}
	for range 3 {
		ts.add("r", wouldRefuse, refuseStoredCode, "update `t` set `a` = ?")
		ts.add("r", wouldWait, "", "update `t` set `a` = ? where `id` = ?")
	}
	ts.add("other", wouldRefuse, refuseUnkeyed, "delete from `t`")
	want := []ObservedShape{
		{Rule: "other", Outcome: wouldRefuse, Reason: refuseUnkeyed, Shape: "delete from `t`", Count: 1},
		{Rule: "r", Outcome: wouldRefuse, Reason: refuseUnkeyed, Shape: "update `t` set `a` = ?", Count: 5},
		{Rule: "r", Outcome: wouldRefuse, Reason: refuseStoredCode, Shape: "update `t` set `a` = ?", Count: 3},
		{Rule: "r", Outcome: wouldWait, Shape: "update `t` set `a` = ? where `id` = ?", Count: 3},
	}
	if got := ts.top(shapeTop); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("top:\n got  %v\n want %v", got, want)
	}

	// Fill r's would_refuse far past what is tracked: two heavy shapes
	// among 1000 light ones.
	for i := range 1000 {
		ts.add("r", wouldRefuse, refuseUnkeyed, fmt.Sprintf("update `t%d` set `a` = ?", i))
		if i%10 == 0 {
			ts.add("r", wouldRefuse, refuseUnkeyed, "update `heavy` set `a` = ?")
		}
	}
	ts.mu.Lock()
	tracked := len(ts.groups[shapeGroup{"r", wouldRefuse}])
	ts.mu.Unlock()
	if tracked != shapeTracked {
		t.Errorf("%d shapes tracked for one rule and outcome, want %d", tracked, shapeTracked)
	}
	top := ts.top(shapeTop)
	var refused []ObservedShape
	for _, s := range top {
		if s.Rule == "r" && s.Outcome == wouldRefuse {
			refused = append(refused, s)
		}
	}
	if len(refused) != shapeTop {
		t.Fatalf("%d would_refuse shapes exported for r, want %d: %v", len(refused), shapeTop, refused)
	}
	// The heavy shape (100 statements) comes first; space-saving may
	// overcount it by at most Over, never undercount.
	if h := refused[0]; h.Shape != "update `heavy` set `a` = ?" || h.Count < 100 || h.Count-h.Over > 100 {
		t.Errorf("first shape %+v, want the heavy one counted 100 (+ at most over_count)", h)
	}
	// Its would_wait shape is untouched by the other group's evictions.
	if w := top[len(top)-1]; w.Outcome != wouldWait || w.Count != 3 || w.Over != 0 {
		t.Errorf("would_wait shape after evictions elsewhere: %+v", w)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(ts)
	if n, err := testutil.GatherAndCount(reg, "lockproxy_observed_top_shapes"); err != nil || n != 1+shapeTop+1 {
		t.Errorf("exported %d series (%v), want %d (other, r's top would_refuse, r's would_wait)", n, err, 1+shapeTop+1)
	}

	// A rule moved to enforce (or removed) has its shapes forgotten.
	ts.keep(&rules.Config{Rules: []rules.Rule{{Name: "r", Mode: rules.ModeObserve}, {Name: "other", Mode: rules.ModeEnforce}}})
	for _, s := range ts.top(shapeTop) {
		if s.Rule != "r" {
			t.Errorf("shape of a rule no longer observing kept: %+v", s)
		}
	}
}

// TestShapeLabel: a label is valid UTF-8 and at most shapeLabelMax bytes,
// cut at a character boundary.
func TestShapeLabel(t *testing.T) {
	long := "select " + strings.Repeat("`é`, ", 100) + "?"
	for _, in := range []string{long, "update `t\xff` set `a` = ?", "", "select ?"} {
		got := shapeLabel(in)
		if !utf8.ValidString(got) || len(got) > shapeLabelMax || got == "" {
			t.Errorf("shapeLabel(%q) = %q (%d bytes)", in, got, len(got))
		}
	}
	if got := shapeLabel(long); !strings.HasSuffix(got, "...") || !strings.HasPrefix(long, strings.TrimSuffix(got, "...")) {
		t.Errorf("long shape cut as %q", got)
	}
	if got := shapeLabel("select ?"); got != "select ?" {
		t.Errorf("short shape changed: %q", got)
	}
}

// TestObservedTopShapesOnProxy runs refused and waiting statements through
// a proxy whose rules observe: their shapes are exported with the right
// counts and reasons, on /metrics and /debug/observed; literals never
// reach either; a rule with more refused shapes than shapeTop exports
// shapeTop series.
func TestObservedTopShapesOnProxy(t *testing.T) {
	_, db := lockSchema(t)
	p := observedProxy(t, observed{locker: memLocker, edit: func(c *rules.Config) {
		lockRules(db, 0)(c)
		for i := range c.Rules {
			c.Rules[i].Mode = rules.ModeObserve
		}
	}})
	a, b := p.db(t, db, ""), p.db(t, db, "")
	ctx := context.Background()

	// Secrets a statement may carry: neither may reach a label.
	const secretNum, secretStr = "987654321", "zq-s3cr3t-literal"
	testbed.MustExec(t, a,
		"UPDATE sku SET stock = stock WHERE stock = "+secretNum,
		"UPDATE sku SET stock = stock WHERE stock = 5",
		"UPDATE sku SET stock = stock WHERE stock = 6",
		"UPDATE hot SET v = v WHERE CAST(v AS CHAR) = '"+secretStr+"'")
	// More refused shapes for hot-row than are exported.
	where := "v <> 0"
	for i := 1; i <= shapeTop+2; i++ {
		where += fmt.Sprintf(" AND v <> %d", i)
		testbed.MustExec(t, a, "UPDATE hot SET v = v WHERE "+where)
	}
	// A would_wait: b writes a row a's transaction has read.
	tx, err := a.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stock int
	if err := tx.QueryRow("SELECT stock FROM sku WHERE sku_id = 1").Scan(&stock); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := b.ExecContext(wctx, "UPDATE sku SET stock = 7 WHERE sku_id = 1"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	got := values(t, p.reg, "lockproxy_observed_top_shapes")
	for labels, want := range map[string]float64{
		"outcome=would_refuse,reason=unkeyed,rule=sku-stock,shape=update `sku` set `stock` = `stock` where `stock` = ?": 3,
		"outcome=would_wait,reason=,rule=sku-stock,shape=update `sku` set `stock` = ? where `sku_id` = ?":               1,
	} {
		if got[labels] != want {
			t.Errorf("%s = %v, want %v", labels, got[labels], want)
		}
	}
	hot := 0
	for labels, v := range got {
		if strings.Contains(labels, "rule=hot-row") {
			hot++
			if !strings.HasPrefix(labels, "outcome=would_refuse,reason=unkeyed,") || v != 1 {
				t.Errorf("hot-row series %s = %v, want a would_refuse{unkeyed} counted once", labels, v)
			}
		}
	}
	if hot != shapeTop {
		t.Errorf("hot-row has %d top-shape series after %d refused shapes, want %d:\n%v", hot, shapeTop+3, shapeTop, got)
	}

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	metricsText := rec.Body.String()
	if !strings.Contains(metricsText, "lockproxy_observed_top_shapes{") {
		t.Fatalf("/metrics has no lockproxy_observed_top_shapes:\n%s", metricsText)
	}
	rec = httptest.NewRecorder()
	p.srv.DebugObserved().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/observed", nil))
	debugText := rec.Body.String()
	for name, text := range map[string]string{"/metrics": metricsText, "/debug/observed": debugText} {
		for _, secret := range []string{secretNum, secretStr} {
			if strings.Contains(text, secret) {
				t.Errorf("%s carries the literal %s", name, secret)
			}
		}
	}
	var debug struct {
		Shapes []ObservedShape `json:"shapes"`
	}
	if err := json.Unmarshal([]byte(debugText), &debug); err != nil {
		t.Fatalf("/debug/observed: %v\n%s", err, debugText)
	}
	if len(debug.Shapes) != len(got) {
		t.Errorf("/debug/observed lists %d shapes, /metrics %d", len(debug.Shapes), len(got))
	}
	if s := debug.Shapes[0]; s.Rule != "hot-row" || s.Outcome != wouldRefuse || s.Reason != refuseUnkeyed || s.Count != 1 {
		t.Errorf("/debug/observed first shape %+v", s)
	}
	// SHOW LOCKPROXY OBSERVED, for a user with PROCESS, lists the same.
	rows, err := a.Query("SHOW LOCKPROXY OBSERVED")
	if err != nil {
		t.Fatal(err)
	}
	var shown []ObservedShape
	for rows.Next() {
		var o ObservedShape
		if err := rows.Scan(&o.Rule, &o.Outcome, &o.Reason, &o.Count, &o.Over, &o.Shape); err != nil {
			t.Fatal(err)
		}
		shown = append(shown, o)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(shown) != fmt.Sprint(debug.Shapes) {
		t.Errorf("SHOW LOCKPROXY OBSERVED:\n%v\n/debug/observed:\n%v", shown, debug.Shapes)
	}
	waitReleased(t, p)
}
