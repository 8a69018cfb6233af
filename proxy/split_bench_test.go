package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/rules"
)

// BenchmarkSplitText is the cost of a text that lockproxy runs in pieces
// (a change of how text is read, here SET NAMES, before a statement on a
// guarded table: querySplit) against a text of as many statements that
// it sends whole (SET of a user variable), each directly and through
// lockproxy, in one autocommit session. What a split adds is
// (lockproxy/split − lockproxy/whole) − (direct/split − direct/whole):
// the extra round trip to the primary and the session's state, read or
// taken from the server's report, before the rest is analysed.
func BenchmarkSplitText(b *testing.B) {
	base := startProxy(b, nil)
	db := freshDB(b, base)
	testbed.MustExec(b, base.direct(b, db, ""), "CREATE TABLE g (id INT PRIMARY KEY, v INT)", "INSERT INTO g VALUES (1, 10)")
	p := startProxyWith(b, func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "g", Table: db + ".g", Key: []string{"id"},
			Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
			OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(2 * time.Second)}}
	}, memlock.New(nil, nil))
	texts := []struct{ name, text string }{
		{"whole", "SET @lockproxy_bench = 1; SELECT v FROM g WHERE id = 1"},
		{"split", "SET NAMES utf8mb4; SELECT v FROM g WHERE id = 1"},
	}
	ctx := context.Background()
	for _, via := range []string{"direct", "lockproxy"} {
		h := p.db(b, db, "multiStatements=true")
		if via == "direct" {
			h = p.direct(b, db, "multiStatements=true")
		}
		for _, tx := range texts {
			b.Run(via+"/"+tx.name, func(b *testing.B) {
				c, err := h.Conn(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				for b.Loop() {
					if _, err := c.ExecContext(ctx, tx.text); err != nil {
						b.Fatalf("%s: %v", tx.text, err)
					}
				}
			})
		}
	}
}
