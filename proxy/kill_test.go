package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// TestKillQuery: KILL QUERY with the connection id of lockproxy's greeting
// (what clients know, e.g. the mariadb CLI on Ctrl-C) stops that session's
// query.
func TestKillQuery(t *testing.T) {
	p := startProxy(t, nil)
	victim, err := client.Connect(p.addr, p.bed.User, p.bed.Password, "")
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	done := make(chan time.Duration, 1)
	go func() {
		begin := time.Now()
		_, _ = victim.Execute("SELECT SLEEP(30)")
		done <- time.Since(begin)
	}()
	killer := p.db(t, "", "")
	time.Sleep(300 * time.Millisecond) // let the SLEEP start
	if _, err := killer.Exec("KILL QUERY " + strconv.FormatUint(uint64(victim.GetConnectionID()), 10)); err != nil {
		t.Fatalf("KILL QUERY: %v", err)
	}
	select {
	case d := <-done:
		t.Logf("the victim's query ended after %v", d.Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("KILL QUERY did not stop the victim's query")
	}
	if _, err := victim.Execute("SELECT 1"); err != nil {
		t.Errorf("KILL QUERY ended the victim's connection: %v", err)
	}
	_, err = killer.Exec("KILL QUERY 4000000000")
	if me := mysqlErr(t, err); me.Number != 1094 || !strings.HasPrefix(me.Message, "lockproxy:") {
		t.Errorf("unknown id: want lockproxy's 1094, got %v", me)
	}
}

// TestKillReplicaQuery: KILL QUERY stops a query lockproxy sent to a
// replica (on the replica, where it runs), and the session goes on; KILL
// CONNECTION ends such a session at once.
func TestKillReplicaQuery(t *testing.T) {
	p := routedProxy(t)
	waitReplica(t, p)
	onReplica := p.bed.Open(t, p.bed.ReplicaAddr, "")
	for _, query := range []bool{true, false} {
		verb := map[bool]string{true: "KILL QUERY ", false: "KILL CONNECTION "}[query]
		t.Run(strings.TrimSpace(verb), func(t *testing.T) {
			victim, err := client.Connect(p.addr, p.bed.User, p.bed.Password, "")
			if err != nil {
				t.Fatal(err)
			}
			defer victim.Close()
			const q = "SELECT SLEEP(30), @@server_id"
			type outcome struct {
				res *mysql.Result
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := victim.Execute(q)
				done <- outcome{res, err}
			}()
			for n := 0; n == 0; {
				if err := onReplica.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = ?", q).Scan(&n); err != nil {
					t.Fatal(err)
				}
				select {
				case o := <-done:
					t.Fatalf("the query ended before it was seen on the replica: %v", o.err)
				case <-time.After(20 * time.Millisecond):
				}
			}
			killer := p.db(t, "", "")
			if _, err := killer.Exec(verb + strconv.FormatUint(uint64(victim.GetConnectionID()), 10)); err != nil {
				t.Fatalf("%s: %v", verb, err)
			}
			var o outcome
			select {
			case o = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s did not stop the query on the replica", verb)
			}
			if query {
				// MariaDB ends an interrupted SLEEP with 1, or with 1317.
				if o.err == nil {
					if s, _ := o.res.GetInt(0, 0); s != 1 {
						t.Errorf("SLEEP returned %d: it ran to its end", s)
					}
					if id, _ := o.res.GetInt(0, 1); id != replicaID {
						t.Errorf("ran on server %d, want the replica", id)
					}
				} else if me := (*mysql.MyError)(nil); !errors.As(o.err, &me) || me.Code != 1317 {
					t.Errorf("killed query: %v; want SLEEP's 1 or 1317", o.err)
				}
				if _, err := victim.Execute("SELECT 1"); err != nil {
					t.Errorf("KILL QUERY ended the victim's connection: %v", err)
				}
				return
			}
			if o.err == nil {
				t.Errorf("the killed connection's query answered %v", o.res.Values)
			}
			if _, err := victim.Execute("SELECT 1"); err == nil {
				t.Error("the killed connection still serves")
			}
		})
	}
}

// TestKillUntranslatedNamesNoThread: lockproxy's connection ids start at
// 2^31 and name no MariaDB thread, so a KILL of a client's id in a form
// lockproxy does not translate (as an expression, through dynamic SQL or
// a prepared statement with a parameter) reaches MariaDB as an unknown
// thread (1094) and ends no session, where it once ended whichever backend
// connection had that number. The forms MariaDB adds to KILL (HARD, SOFT)
// and a KILL behind comments are translated.
func TestKillUntranslatedNamesNoThread(t *testing.T) {
	p := startProxy(t, nil)
	direct := p.direct(t, "", "")
	var sessions []*client.Conn
	for range 4 {
		c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sessions = append(sessions, c)
		id := c.GetConnectionID()
		if id < 1<<31 {
			t.Errorf("connection id %d: want one at or above 2^31", id)
		}
		var n int
		if err := direct.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n); err != nil || n != 0 {
			t.Errorf("MariaDB has %d threads (%v) numbered like lockproxy's connection %d", n, err, id)
		}
	}
	victim := strconv.FormatUint(uint64(sessions[0].GetConnectionID()), 10)
	killer := p.db(t, "", "multiStatements=true")
	for _, q := range []string{
		"KILL " + victim + " + 0",
		"EXECUTE IMMEDIATE 'KILL " + victim + "'",
	} {
		_, err := killer.Exec(q)
		if me := mysqlErr(t, err); me.Number != 1094 {
			t.Errorf("%s: %v, want 1094 (no such thread)", q, err)
		}
	}
	if _, err := killer.Exec("KILL ?", sessions[0].GetConnectionID()); mysqlErr(t, err).Number != 1094 {
		t.Errorf("prepared KILL ?: %v, want 1094", err)
	}
	for i, c := range sessions {
		if _, err := c.Execute("SELECT 1"); err != nil {
			t.Errorf("session %d after the untranslated KILLs: %v", i, err)
		}
	}
	// Behind comments MariaDB skips, a KILL is still lockproxy's to
	// translate: it ends the session it names, as directly.
	extra, err := client.Connect(p.addr, p.bed.User, p.bed.Password, "")
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	commented := strconv.FormatUint(uint64(extra.GetConnectionID()), 10)
	if _, err := killer.Exec("/* a comment first */ KILL QUERY " + commented); err != nil {
		t.Errorf("commented KILL QUERY: %v", err)
	}
	if _, err := extra.Execute("SELECT 1"); err != nil {
		t.Errorf("the session after KILL QUERY: %v", err)
	}
	if _, err := killer.Exec("# first\n-- second\nKILL HARD CONNECTION " + commented); err != nil {
		t.Errorf("commented KILL HARD CONNECTION: %v", err)
	}
	if _, err := extra.Execute("SELECT 1"); err == nil {
		t.Error("the session a commented KILL named still answers")
	}

	// KILL HARD QUERY stops the victim's query, KILL SOFT CONNECTION ends it.
	done := make(chan error, 1)
	go func() { _, err := sessions[1].Execute("SELECT SLEEP(30)"); done <- err }()
	time.Sleep(300 * time.Millisecond)
	if _, err := killer.Exec("KILL HARD QUERY " + strconv.FormatUint(uint64(sessions[1].GetConnectionID()), 10)); err != nil {
		t.Fatalf("KILL HARD QUERY: %v", err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("KILL HARD QUERY did not stop the query")
	}
	if _, err := sessions[1].Execute("SELECT 1"); err != nil {
		t.Errorf("KILL HARD QUERY ended the connection: %v", err)
	}
	if _, err := killer.Exec("KILL SOFT CONNECTION " + strconv.FormatUint(uint64(sessions[2].GetConnectionID()), 10)); err != nil {
		t.Fatalf("KILL SOFT CONNECTION: %v", err)
	}
	if _, err := sessions[2].Execute("SELECT 1"); err == nil {
		t.Error("the connection KILL SOFT CONNECTION named still serves")
	}
	if _, err := sessions[3].Execute("SELECT 1"); err != nil {
		t.Errorf("another session after KILL SOFT CONNECTION: %v", err)
	}
}

// TestKillInMultiStatementText: a KILL among other statements of one text
// (mysql2's `kill ?; select sleep(0.05)`) is translated as when sent
// alone: through lockproxy, as directly, it stops the named session's
// query or ends its connection and the rest of the text then runs; a KILL
// of an id that names no session ends the text with 1094.
func TestKillInMultiStatementText(t *testing.T) {
	p := startProxy(t, nil)
	direct := p.direct(t, "", "")
	var outcomes [2][]string
	for i, addr := range []string{p.bed.PrimaryAddr, p.addr} {
		var out []string
		note := func(step string, what ...string) { out = append(out, step+": "+strings.Join(what, " | ")) }
		killer := dialRaw(t, addr, p.bed.User, p.bed.Password, "", false, mysql.CLIENT_MULTI_STATEMENTS, mysql.CLIENT_MULTI_RESULTS)
		run := func(q string) []string {
			killer.send(append([]byte{mysql.COM_QUERY}, q...)...)
			return resultSummary(killer)
		}

		// KILL QUERY in the middle of a text.
		victim, err := client.Connect(addr, p.bed.User, p.bed.Password, "")
		if err != nil {
			t.Fatal(err)
		}
		defer victim.Close()
		sleep := fmt.Sprintf("SELECT SLEEP(30) /* kill in text %d */", i)
		done := make(chan error, 1)
		go func() { _, err := victim.Execute(sleep); done <- err }()
		testbed.Eventually(t, 20*time.Second, "the victim's SLEEP runs", func() bool {
			var n int
			return direct.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = ?", sleep).Scan(&n) == nil && n == 1
		})
		note("kill query", run(fmt.Sprintf("SELECT 1; KILL QUERY %d; SELECT 2", victim.GetConnectionID()))...)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the KILL QUERY in the text did not stop the victim's query", addr)
		}
		_, err = victim.Execute("SELECT 1")
		note("victim after kill query", errCode(err))

		// KILL (CONNECTION) first, as mysql2 sends it.
		victim2, err := client.Connect(addr, p.bed.User, p.bed.Password, "")
		if err != nil {
			t.Fatal(err)
		}
		defer victim2.Close()
		note("kill connection", run(fmt.Sprintf("kill %d; select 2", victim2.GetConnectionID()))...)
		// Its connection is closed by the time the text is answered
		// (MariaDB shuts it before answering the KILL), so that a pool
		// asked for a connection then does not give out the dead one.
		raw, err := victim2.Conn.Conn.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		state := (&backendConn{raw: raw}).peek()
		note("victim closed when the text is answered", fmt.Sprint(state == peekClosed || state == peekReset))
		_, err = victim2.Execute("SELECT 1")
		note("victim after kill connection", fmt.Sprint(err != nil))

		// An id that names no session ends the text.
		note("unknown id", run("KILL 4000000000; SELECT 4")...)
		note("killer after", run("SELECT 5")...)

		// Under NO_BACKSLASH_ESCAPES '\' is a whole string, so the KILL
		// after it is a statement of its own, translated as one.
		victim3, err := client.Connect(addr, p.bed.User, p.bed.Password, "")
		if err != nil {
			t.Fatal(err)
		}
		defer victim3.Close()
		note("no backslash escapes", run("SET sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")...)
		note("kill after '\\'", run(fmt.Sprintf(`SELECT '\'; KILL %d; SELECT '\'`, victim3.GetConnectionID()))...)
		_, err = victim3.Execute("SELECT 1")
		note("victim after kill after '\\'", fmt.Sprint(err != nil))

		// A comment after the KILL's ';' is one more statement to
		// MariaDB, answered OK.
		victim4, err := client.Connect(addr, p.bed.User, p.bed.Password, "")
		if err != nil {
			t.Fatal(err)
		}
		defer victim4.Close()
		note("kill then a comment", run(fmt.Sprintf("KILL QUERY %d; -- done", victim4.GetConnectionID()))...)
		note("kill then a block comment", run(fmt.Sprintf("KILL QUERY %d; /* done */", victim4.GetConnectionID()))...)
		note("kill then blanks", run(fmt.Sprintf("KILL QUERY %d;  ", victim4.GetConnectionID()))...)
		outcomes[i] = out
	}
	if !slices.Equal(outcomes[0], outcomes[1]) {
		t.Errorf("through lockproxy:\n  %s\ndirectly:\n  %s", strings.Join(outcomes[1], "\n  "), strings.Join(outcomes[0], "\n  "))
	}
	if want := "victim after kill connection: true"; !slices.Contains(outcomes[1], want) {
		t.Errorf("through lockproxy the KILL in the text did not end the victim's connection: %v", outcomes[1])
	}
}

// resultSummary reads a whole response to a text and names each result:
// ok, the rows of a one-column result, or an error's code.
func resultSummary(r *rawConn) []string {
	var out []string
	for {
		p := r.read()
		var st uint16
		switch p[0] {
		case mysql.ERR_HEADER:
			return append(out, fmt.Sprintf("err %d", binary.LittleEndian.Uint16(p[1:])))
		case mysql.OK_HEADER:
			st, _ = okStatus(p)
			out = append(out, "ok")
		default:
			n, _, _, _ := readLenEncInt(p, 0)
			r.columns(int(n))
			var rows []string
			for p = r.read(); !r.isEnd(p); p = r.read() {
				rows = append(rows, string(p[1:]))
			}
			out = append(out, "rows "+strings.Join(rows, ","))
			st = resultStatus(p, r.deprecateEOF)
		}
		if st&mysql.SERVER_MORE_RESULTS_EXISTS == 0 {
			return out
		}
	}
}
