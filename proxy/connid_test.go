package proxy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
)

// connectionID runs q on c and returns its one value and column name.
func connectionID(t *testing.T, c *client.Conn, q string) (uint64, string) {
	t.Helper()
	r, err := c.Execute(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	v, err := r.GetUint(0, 0)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v, string(r.Fields[0].Name)
}

// TestConnectionID: a client has one connection id for its whole life, the greeting's:
// CONNECTION_ID() answers it in autocommit (a replica), in a transaction
// (the primary) and prepared, and KILL takes it.
func TestConnectionID(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE t (id INT PRIMARY KEY, owner BIGINT)")
	waitReplica(t, p)
	c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := uint64(c.GetConnectionID())
	for _, q := range []string{"SELECT CONNECTION_ID()", "BEGIN", "SELECT CONNECTION_ID()",
		"INSERT INTO t VALUES (1, CONNECTION_ID())", "COMMIT", "select connection_id() AS id"} {
		switch q {
		case "BEGIN", "COMMIT", "INSERT INTO t VALUES (1, CONNECTION_ID())":
			if _, err := c.Execute(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			continue
		}
		id, name := connectionID(t, c, q)
		if id != want {
			t.Errorf("%s = %d, want the greeting's id %d", q, id, want)
		}
		if wantName := map[bool]string{true: "id", false: "CONNECTION_ID()"}[q[len(q)-2:] == "id"]; name != wantName {
			t.Errorf("%s: column %q, want %q", q, name, wantName)
		}
	}
	if id, _ := connectionID(t, c, "SELECT owner FROM t WHERE id = 1"); id != want {
		t.Errorf("stored CONNECTION_ID() = %d, want %d", id, want)
	}
	st, err := c.Prepare("SELECT CONNECTION_ID() + ?")
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Execute(0)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := r.GetInt(0, 0); uint64(v) != want {
		t.Errorf("prepared CONNECTION_ID() = %d, want %d", v, want)
	}
	_ = st.Close()

	// KILL of its own id ends the client's own connection, as on MariaDB.
	_, err = c.Execute("KILL CONNECTION_ID()")
	var me *gomysql.MyError
	if !errors.As(err, &me) || me.Code != 1927 {
		t.Fatalf("KILL CONNECTION_ID(): want MariaDB's 1927, got %v", err)
	}
	time.Sleep(2 * goneCheckEvery)
	if _, err := c.Execute("SELECT 1"); err == nil || errors.As(err, &me) {
		t.Errorf("after killing itself: want the connection closed, got %v", err)
	}
}

// TestKillOtherUser: KILL of another user's session is refused as MariaDB refuses it (1095),
// naming the id the client knows; an unknown id gets 1094. Multiplexed,
// a session between commands holds no thread for MariaDB to judge, and
// lockproxy refuses a KILL of it by another user (1105) rather than
// guess that user's privilege (a KILL by its own user: TestMultiplexKillIdle).
func TestKillOtherUser(t *testing.T) {
	base := startProxy(t, nil)
	users := []rules.User{{User: "lp_kill_a", Password: "kill-a"}, {User: "lp_kill_b", Password: "kill-b"}}
	for _, u := range users {
		testbed.MustExec(t, base.direct(t, "", ""), fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s'", u.User, u.Password))
	}
	t.Run("pinned", func(t *testing.T) {
		killOtherUser(t, startProxy(t, func(c *rules.Config) { c.Users = append(c.Users, users...); pinned(c) }), users, false)
	})
	t.Run("multiplexed", func(t *testing.T) {
		killOtherUser(t, startProxy(t, func(c *rules.Config) { c.Users = append(c.Users, users...); multiplexed(4)(c) }), users, true)
	})
}

func killOtherUser(t *testing.T, p *testProxy, users []rules.User, multiplex bool) {
	bed := testbedFor(t)
	a, err := client.Connect(p.addr, users[0].User, users[0].Password, "")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := client.Connect(p.addr, users[1].User, users[1].Password, "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	own, err := client.Connect(p.addr, bed.User, bed.Password, "")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	notOwner := func(id uint32) (uint16, string) {
		if multiplex {
			return 1105, fmt.Sprintf("lockproxy: connection %d belongs to another user and holds no backend connection now", id)
		}
		return 1095, fmt.Sprintf("You are not owner of thread %d", id)
	}
	for _, tc := range []struct {
		kill string
		id   uint32
	}{
		{fmt.Sprintf("KILL %d", a.GetConnectionID()), a.GetConnectionID()},
		{fmt.Sprintf("KILL QUERY %d", a.GetConnectionID()), a.GetConnectionID()},
		{"KILL 4000000000", 0},
	} {
		code, msg := notOwner(tc.id)
		if tc.id == 0 {
			code, msg = 1094, "lockproxy: Unknown thread id: 4000000000"
		}
		_, err := b.Execute(tc.kill)
		var me *gomysql.MyError
		if !errors.As(err, &me) || me.Code != code || !strings.HasPrefix(me.Message, msg) {
			t.Errorf("%s by another user: want %d %q, got %v", tc.kill, code, msg, err)
		}
	}
	if _, err := a.Execute("SELECT 1"); err != nil {
		t.Fatalf("a refused KILL ended its target: %v", err)
	}
	if multiplex {
		return
	}
	// A user with the privilege (ALL on *.*) may.
	if _, err := own.Execute(fmt.Sprintf("KILL %d", a.GetConnectionID())); err != nil {
		t.Fatalf("KILL by a privileged user: %v", err)
	}
	time.Sleep(2 * goneCheckEvery)
	if _, err := a.Execute("SELECT 1"); err == nil {
		t.Error("the killed session still answers")
	}
}

// TestConnectionIDsAgree: through lockproxy as directly, a session's user
// lock is held by CONNECTION_ID() (`IS_USED_LOCK(name) = CONNECTION_ID()`,
// text and prepared, named as MariaDB names the column), and SHOW
// [FULL] PROCESSLIST lists the session under the id its greeting gave,
// which another session's KILL ends.
func TestConnectionIDsAgree(t *testing.T) {
	p := routedProxy(t)
	db := freshDB(t, p)
	for _, target := range []clientTarget{{"direct", p.bed.PrimaryAddr}, {"proxy", p.addr}} {
		t.Run(target.name, func(t *testing.T) {
			c, err := client.Connect(target.addr, p.bed.User, p.bed.Password, db)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			want := uint64(c.GetConnectionID())
			lock := "lp_ids_" + target.name
			if v, _ := connectionID(t, c, "SELECT GET_LOCK('"+lock+"', 0)"); v != 1 {
				t.Fatalf("GET_LOCK = %d", v)
			}
			if v, _ := connectionID(t, c, "SELECT IS_USED_LOCK('"+lock+"') = CONNECTION_ID()"); v != 1 {
				t.Errorf("IS_USED_LOCK(%s) = CONNECTION_ID() is %d, want 1", lock, v)
			}
			if v, name := connectionID(t, c, "SELECT IS_USED_LOCK('"+lock+"')"); v != want || name != "IS_USED_LOCK('"+lock+"')" {
				t.Errorf("IS_USED_LOCK = %d named %q, want %d named as the call", v, name, want)
			}
			st, err := c.Prepare("SELECT IS_USED_LOCK(?) = CONNECTION_ID(), IS_USED_LOCK('lp_ids_free')")
			if err != nil {
				t.Fatal(err)
			}
			r, err := st.Execute(lock)
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := r.GetInt(0, 0); v != 1 {
				t.Errorf("prepared IS_USED_LOCK(?) = CONNECTION_ID() is %d, want 1", v)
			}
			if free, _ := r.IsNull(0, 1); !free {
				t.Error("IS_USED_LOCK of a free lock is not NULL")
			}
			_ = st.Close()

			other, err := client.Connect(target.addr, p.bed.User, p.bed.Password, db)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			for _, q := range []string{"SHOW PROCESSLIST", "show full processlist"} {
				if !processlistHas(t, c, q, want, q) {
					t.Errorf("%s: no row with the session's own id %d running it", q, want)
				}
				if !processlistHas(t, other, q, want, "") {
					t.Errorf("%s from another session: no row with id %d", q, want)
				}
			}
			if _, err := other.Execute(fmt.Sprintf("KILL %d", want)); err != nil {
				t.Fatalf("KILL of the id SHOW PROCESSLIST gave: %v", err)
			}
			closed := time.Now().Add(10 * time.Second)
			for {
				if _, err := c.Execute("SELECT 1"); err != nil {
					break
				}
				if time.Now().After(closed) {
					t.Fatal("the session SHOW PROCESSLIST named is still alive after KILL")
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// processlistHas reports whether q (SHOW PROCESSLIST) run on c lists a row
// with id, running info when info is not empty.
func processlistHas(t *testing.T, c *client.Conn, q string, id uint64, info string) bool {
	t.Helper()
	r, err := c.Execute(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	for i := range r.RowNumber() {
		got, _ := r.GetUintByName(i, "Id")
		text, _ := r.GetStringByName(i, "Info")
		if got == id && (info == "" || text == info) {
			return true
		}
	}
	return false
}

// TestConnectionIDReadsAsTheServer: CONNECTION_ID() is replaced where
// the session's server reads a call, never inside what it reads as a
// string literal: under NO_BACKSLASH_ESCAPES '\' is a whole string, and
// in gbk 0xbf5c is one character. A literal 'CONNECTION_ID()' between such
// strings is stored as written, and a call beside one answers the
// client's id, as directly.
func TestConnectionIDReadsAsTheServer(t *testing.T) {
	p := startProxy(t, nil)
	db := freshDB(t, p)
	testbed.MustExec(t, p.direct(t, db, ""), "CREATE TABLE t (id INT PRIMARY KEY, a VARBINARY(16), b VARCHAR(32), c VARBINARY(16))")
	c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, step := range []struct {
		set, lit string // the session's setting, a string literal's text
	}{
		{"SET sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')", `\`},
		{"SET sql_mode = DEFAULT, NAMES gbk", "\xbf\x5c"},
	} {
		if _, err := c.Execute(step.set); err != nil {
			t.Fatalf("%s: %v", step.set, err)
		}
		q := fmt.Sprintf("INSERT INTO t VALUES (%d, '%s', 'CONNECTION_ID()', '%s')", i, step.lit, step.lit)
		if _, err := c.Execute(q); err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		r, err := c.Execute(fmt.Sprintf("SELECT b FROM t WHERE id = %d", i))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := r.GetString(0, 0); got != "CONNECTION_ID()" {
			t.Errorf("after %s: the literal 'CONNECTION_ID()' was stored as %q", step.set, got)
		}
		got, _ := connectionID(t, c, fmt.Sprintf("SELECT CONNECTION_ID() AS c FROM t WHERE a = '%s' AND id = %d", step.lit, i))
		if got != uint64(c.GetConnectionID()) {
			t.Errorf("after %s: CONNECTION_ID() beside the literal answered %d, want the client's %d", step.set, got, c.GetConnectionID())
		}
	}
}
