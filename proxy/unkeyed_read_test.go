package proxy

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestUnkeyedReadInTxn: DB-API clients (PyMySQL, mysqlclient, SQLAlchemy) start with autocommit
// off, so every read is inside a transaction: a range or a full scan of a
// guarded table then runs without row locks, counted, unless the rule says
// on_unkeyed_read: reject.
func TestUnkeyedReadInTxn(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	testbed.MustExec(t, base.direct(t, db, ""),
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (1, 10), (2, 20), (3, 30)")
	for _, tc := range []struct {
		onRead string
		reject bool
	}{{"", false}, {rules.OnUnkeyedAllow, false}, {rules.OnUnkeyedReject, true}} {
		t.Run("on_unkeyed_read="+tc.onRead, func(t *testing.T) {
			p := guardedProxy(t, db, func(r *rules.Rule) {
				r.OnUnkeyedRead = tc.onRead
				if tc.onRead == "" {
					r.OnUnkeyedRead = rules.OnUnkeyedAllow // what the loader's default gives
				}
			})
			c := conn(t, p.db(t, db, ""))
			mustExecConn(t, c, "SET autocommit = 0")
			var sum int
			err := c.QueryRowContext(bg, "SELECT SUM(stock) FROM (SELECT stock FROM sku ORDER BY sku_id) s").Scan(&sum)
			if tc.reject {
				if me := mysqlErr(t, err); me.Number != 1105 || !containsAll(me.Message, "lockproxy:", "on_unkeyed_read: reject") {
					t.Fatalf("want lockproxy's 1105 naming on_unkeyed_read, got %v", me)
				}
			} else if err != nil || sum != 60 {
				t.Fatalf("unkeyed read in a transaction: sum %d, %v", sum, err)
			}
			// A keyed read still locks, and an unkeyed write is still refused.
			if err := c.QueryRowContext(bg, "SELECT stock FROM sku WHERE sku_id = 2").Scan(&sum); err != nil || sum != 20 {
				t.Fatalf("keyed read: %d, %v", sum, err)
			}
			if got := p.srv.locker.Snapshot(); len(got) != 1 {
				t.Errorf("keyed read in a transaction holds %d locks, want 1", len(got))
			}
			_, err = c.ExecContext(bg, "UPDATE sku SET stock = 0")
			if me := mysqlErr(t, err); me.Number != 1105 {
				t.Errorf("unkeyed write: want 1105, got %v", me)
			}
			mustExecConn(t, c, "ROLLBACK")
			want := 1.0
			if tc.reject {
				want = 0
			}
			if got := testutil.ToFloat64(p.srv.metrics.unkeyedReads.WithLabelValues("sku-stock")); got != want {
				t.Errorf("lockproxy_unkeyed_reads_total = %v, want %v", got, want)
			}
		})
	}
}

// TestUnkeyedReadsAudited: every unkeyed read in a transaction is
// counted, and audited through the logger's sampler like any other line
// (lockproxy's production logger samples): with a sampler that lets one
// such line a minute through, three reads write one line, with the rule,
// table, reason, session, user and client, and count three.
func TestUnkeyedReadsAudited(t *testing.T) {
	_, db := lockSchema(t)
	core, logs := observer.New(zapcore.DebugLevel)
	p := observedProxy(t, observed{log: zap.New(zapcore.NewSamplerWithOptions(core, time.Minute, 1, 0)),
		edit: lockRules(db, 0), locker: memLocker})
	c := conn(t, p.db(t, db, ""))
	mustExecConn(t, c, "BEGIN")
	for range 3 {
		var n int
		if err := c.QueryRowContext(bg, "SELECT COUNT(*) FROM sku WHERE stock > 0").Scan(&n); err != nil || n != 2 {
			t.Fatalf("unkeyed read: %d, %v", n, err)
		}
	}
	mustExecConn(t, c, "ROLLBACK")
	if got := testutil.ToFloat64(p.srv.metrics.unkeyedReads.WithLabelValues("sku-stock")); got != 3 {
		t.Errorf("lockproxy_unkeyed_reads_total = %v, want 3", got)
	}
	lines := logs.FilterMessageSnippet("unkeyed read in a transaction").All()
	if len(lines) != 1 {
		t.Fatalf("%d audit lines of unkeyed reads, want 1 (the sampler's first)", len(lines))
	}
	f := lines[0].ContextMap()
	if lines[0].LoggerName != "audit" || f["rule"] != "sku-stock" || f["table"] != db+".sku" || f["reason"] == "" ||
		f["user"] == "" || !strings.HasPrefix(f["client"].(string), "127.0.0.1:") || f["session"] == nil {
		t.Errorf("audit line %q (logger %q) fields %v", lines[0].Message, lines[0].LoggerName, f)
	}
}

var bg = context.Background()

func mustExecConn(t *testing.T, c *sql.Conn, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := c.ExecContext(bg, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
