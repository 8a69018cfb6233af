package proxy

import (
	"testing"
)

func TestTmpFresh(t *testing.T) {
	p := startProxy(t, nil)
	name := freshNamedDB(t, p, "tmpfresh")
	for _, side := range []string{"direct", "proxy"} {
		var db = p.direct(t, name, "")
		if side == "proxy" {
			db = p.db(t, name, "")
		}
		db.SetMaxIdleConns(0)
		for i := 0; i < 5; i++ {
			c := conn(t, db)
			var id int
			c.QueryRowContext(t.Context(), "SELECT CONNECTION_ID()").Scan(&id)
			var tr transcript
			tr.query(c, "SELECT @leak, @@session.sql_mode = @@global.sql_mode, @@time_zone, @@autocommit, @@in_transaction, DATABASE(), @@character_set_client, @@collation_connection, @@character_set_results, IS_FREE_LOCK('lp_x')")
			t.Logf("%s %d id=%d\n%s", side, i, id, tr.b.String())
			mustExecC(t, c, "SET @leak = 1", "SET SESSION sql_mode = 'ANSI_QUOTES'", "SET time_zone = '+05:00'", "SET NAMES latin1", "SET autocommit = 0", "DO GET_LOCK('lp_x', 0)")
			c.Close()
		}
	}
}

func mustExecC(t *testing.T, c execer, stmts ...string) {
	for _, s := range stmts {
		if _, err := c.ExecContext(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}
