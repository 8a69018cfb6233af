package proxy

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/memlock"
	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
)

// responsePackets reads one whole response to a COM_QUERY: every packet
// of every result, up to the one without SERVER_MORE_RESULTS_EXISTS.
func responsePackets(r *rawConn) [][]byte {
	var out [][]byte
	read := func() []byte {
		p := append([]byte(nil), r.read()...)
		out = append(out, p)
		return p
	}
	for {
		p := read()
		var st uint16
		switch p[0] {
		case mysql.ERR_HEADER:
			return out
		case mysql.OK_HEADER:
			st, _ = okStatus(p)
		default:
			n, _, _, err := readLenEncInt(p, 0)
			if err != nil {
				r.t.Fatalf("column count: %v", err)
			}
			for range n {
				read()
			}
			if !r.deprecateEOF {
				read()
			}
			for p = read(); !r.isEnd(p); p = read() {
			}
			st = resultStatus(p, r.deprecateEOF)
		}
		if st&mysql.SERVER_MORE_RESULTS_EXISTS == 0 {
			return out
		}
	}
}

// TestSessionStatePackets: primary connections always negotiate
// CLIENT_SESSION_TRACK and track sql_mode, the database and any change of
// state for lockproxy's sake, yet a client sees every packet as MariaDB
// sends it directly: a client without the capability gets OKs without
// session state (and without SERVER_SESSION_STATE_CHANGED), one with it
// gets the state MariaDB reports under the session's own tracking (the
// server's defaults: no sql_mode, no state-change entries).
func TestSessionStatePackets(t *testing.T) {
	base := startProxy(t, nil)
	db := freshNamedDB(t, base, dbName(t, "a"))
	testbed.MustExec(t, base.direct(t, db, ""), "CREATE TABLE g (id INT PRIMARY KEY, v INT)")
	p := startProxyWith(t, func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "g", Table: db + ".g", Key: []string{"id"},
			Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
			OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(2 * time.Second)}}
	}, memlock.New(nil, nil))
	texts := []string{
		"SET NAMES gbk", "SELECT @@character_set_client", "SET NAMES utf8mb4",
		"SET sql_mode = 'ANSI_QUOTES'", "SELECT 1", "SET sql_mode = DEFAULT",
		"SET autocommit = 0", "SET autocommit = 1", "SET time_zone = '+01:00'",
		"USE information_schema", "USE `" + db + "`", "SET @a = 1", "DO 1",
		"CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1), (2)",
		"SET character_set_client = latin1; SELECT id FROM t ORDER BY id; SET sql_mode = ''; USE information_schema",
		"SET NAMES utf8mb4; SELECT * FROM no_such_table",
		"USE `" + db + "`; UPDATE t SET id = id + 10 WHERE id = 1",
		// Texts naming the guarded table g in which a change of how
		// text is read comes before other statements: lockproxy runs
		// them in pieces, and the client must not see the seams.
		"SET NAMES latin1; SELECT id, v FROM g ORDER BY id; SET sql_mode = 'ANSI_QUOTES'; SELECT \"v\" FROM g WHERE id = 1; SET sql_mode = DEFAULT",
		"SET NAMES utf8mb4; UPDATE g SET v = v + 1 WHERE id = 2; SELECT 1/0; SELECT v FROM g WHERE id = 2",
		"SET character_set_client = utf8mb4; SELECT * FROM g ORDER BY id; SELECT * FROM no_such_table; SELECT 2",
		"SET sql_mode = DEFAULT; INSERT INTO g (id, v) VALUES (3, 3), (4, 4); SHOW WARNINGS",
		"DELETE FROM g WHERE id = 4; SET NAMES utf8mb4; DELETE FROM g WHERE id = 3; SET NAMES utf8mb4",
		"SET NAMES utf8mb4; INSERT INTO g (id, v) VALUES (1, 1)",
		"SET NAMES utf8mb4; USE information_schema; SELECT COUNT(*) FROM `" + db + "`.g; USE `" + db + "`",
		// What the session's last statement reports (FOUND_ROWS(),
		// ROW_COUNT()) is the client's statement's, not a read of the
		// session's state lockproxy made after a change.
		"SELECT SQL_CALC_FOUND_ROWS id FROM g ORDER BY id LIMIT 1; SET NAMES utf8mb4; SELECT FOUND_ROWS(), ROW_COUNT() FROM g LIMIT 1",
		"SELECT SQL_CALC_FOUND_ROWS id FROM g ORDER BY id LIMIT 1", "SET NAMES utf8mb4", "SELECT FOUND_ROWS(), ROW_COUNT()",
		"UPDATE g SET v = v + 1 WHERE id = 1", "SET sql_mode = DEFAULT", "SELECT ROW_COUNT(), FOUND_ROWS()",
		"USE information_schema", "SELECT ROW_COUNT()", "USE `" + db + "`",
	}
	for _, track := range []bool{false, true} {
		for _, deprecateEOF := range []bool{false, true} {
			t.Run(fmt.Sprintf("session_track=%v/deprecate_eof=%v", track, deprecateEOF), func(t *testing.T) {
				caps := []uint32{mysql.CLIENT_MULTI_STATEMENTS, mysql.CLIENT_MULTI_RESULTS}
				if track {
					caps = append(caps, mysql.CLIENT_SESSION_TRACK)
				}
				// Each runs the whole list on a fresh table: directly,
				// then through lockproxy.
				run := func(addr string) [][][]byte {
					testbed.MustExec(t, p.direct(t, db, ""), "DROP TABLE IF EXISTS t", "DELETE FROM g", "INSERT INTO g VALUES (1, 10), (2, 20)")
					r := dialRaw(t, addr, p.bed.User, p.bed.Password, db, deprecateEOF, caps...)
					var out [][][]byte
					for _, q := range texts {
						r.send(append([]byte{mysql.COM_QUERY}, q...)...)
						out = append(out, responsePackets(r))
					}
					return out
				}
				direct, proxied := run(p.bed.PrimaryAddr), run(p.addr)
				var sqlModeReported bool
				for k, q := range texts {
					want, got := direct[k], proxied[k]
					if len(got) != len(want) {
						t.Fatalf("%s: %d packets through lockproxy, %d directly:\n%x\n%x", q, len(got), len(want), got, want)
					}
					for i := range want {
						if !bytes.Equal(sortedVars(got[i]), sortedVars(want[i])) {
							t.Errorf("%s: packet %d through lockproxy\n%x\ndirectly\n%x", q, i, got[i], want[i])
						}
						if got[i][0] == mysql.OK_HEADER && !track {
							if at := statusOffset(got[i]); binary.LittleEndian.Uint16(got[i][at:])&mysql.SERVER_SESSION_STATE_CHANGED != 0 {
								t.Errorf("%s: OK with SERVER_SESSION_STATE_CHANGED to a client without CLIENT_SESSION_TRACK", q)
							}
						}
						if bytes.Contains(got[i], []byte("\x08sql_mode")) {
							sqlModeReported = true
						}
					}
				}
				if sqlModeReported {
					t.Errorf("sql_mode reported to a client whose session does not track it")
				}
			})
		}
	}
}

// TestTrackedStripsState: the OKs MariaDB sends a CLIENT_SESSION_TRACK
// connection (bytes from MariaDB 10.11) reach a client without the
// capability as MariaDB sends them to such a client; the database, the
// sql_mode and the character sets they report become the session's, and
// only what cannot be taken so marks its state for reading again.
func TestTrackedStripsState(t *testing.T) {
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	start := modeState{mode: parser.ParseSQLMode(""), charset: "utf8mb4", connection: "utf8mb4"}
	gbk, ansi := start, start
	gbk.charset, gbk.connection, gbk.unsafe = "gbk", "gbk", true
	ansi.mode = parser.ParseSQLMode("ANSI_QUOTES")
	stale := start
	stale.stale = true
	for _, c := range []struct {
		name, tracked, plain string
		want                 modeState
		db                   string
	}{
		{"SET NAMES gbk", "000000024000000056001d186368617261637465725f7365745f636f6e6e656374696f6e0367626b0019146368617261637465725f7365745f636c69656e740367626b001a156368617261637465725f7365745f726573756c74730367626b",
			"00000002000000", gbk, "shop"},
		{"SET sql_mode", "00000002c00000001700150873716c5f6d6f64650b414e53495f51554f544553", "00000002800000", ansi, "shop"},
		{"USE mysql", "00000002c0000000080106056d7973716c", "00000002800000", start, "mysql"},
		{"SET autocommit = 0", "000000004000000011000f0a6175746f636f6d6d6974034f4646", "00000000000000", start, "shop"},
		{"no state", "00000002000000", "00000002000000", start, "shop"},
		{"info kept", "000100024000000c52656164792e2e2e2e2e2e2e11000f0a6175746f636f6d6d6974034f4646", "000100020000000c52656164792e2e2e2e2e2e2e", start, "shop"},
		{"unreadable state", "0000000240000000030005ff", "00000002000000", stale, "shop"},
		// SET collation_connection = latin1_swedish_ci: the connection's
		// character set changed too, unnamed.
		{"collation_connection", "000000024000000029002714636f6c6c6174696f6e5f636f6e6e656374696f6e116c6174696e315f737765646973685f6369", "00000002000000", stale, "shop"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, clientTracks := range []bool{false, true} {
				be := &backendConn{key: poolKey{track: true}, clientTrack: clientTracking{every: true, schema: true, stateChange: true}}
				begin := start
				begin.db = "shop"
				s := &session{ex: exchange{src: be}, be: be, reading: begin}
				if clientTracks {
					s.client.caps = mysql.CLIENT_SESSION_TRACK
				}
				in := unhex(c.tracked)
				got := s.tracked(append([]byte(nil), in...), true)
				want := unhex(c.plain)
				if clientTracks {
					want = in
				}
				if !bytes.Equal(got, want) {
					t.Errorf("client tracks %v: got %x, want %x", clientTracks, got, want)
				}
				state := c.want
				state.db = c.db
				if s.reading != state {
					t.Errorf("client tracks %v: state %+v, want %+v", clientTracks, s.reading, state)
				}
			}
		})
	}
	// An EOF that says the state changed but cannot carry it.
	s := &session{ex: exchange{src: &backendConn{key: poolKey{track: true}}}}
	if got := s.tracked([]byte{0xfe, 0, 0, 0x02, 0x40}, false); !bytes.Equal(got, []byte{0xfe, 0, 0, 0x02, 0}) || !s.reading.stale {
		t.Errorf("EOF with SERVER_SESSION_STATE_CHANGED: got %x, stale %v", got, s.reading.stale)
	}
}

// TestSplitBound: a text of more changes than maxSplitPieces is run in
// that many pieces and the rest is planned whole: refused, since it still
// changes the character set before a statement on a guarded table. The
// client sees one OK per piece run, then lockproxy's 1105, in one sequence.
func TestSplitBound(t *testing.T) {
	base := startProxy(t, nil)
	db := freshNamedDB(t, base, dbName(t, "a"))
	testbed.MustExec(t, base.direct(t, db, ""), "CREATE TABLE g (id INT PRIMARY KEY, v INT)", "INSERT INTO g VALUES (1, 10)")
	p := startProxyWith(t, func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "g", Table: db + ".g", Key: []string{"id"},
			Lock: []string{rules.LockWrite}, OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(2 * time.Second)}}
	}, memlock.New(nil, nil))
	r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, false, mysql.CLIENT_MULTI_STATEMENTS, mysql.CLIENT_MULTI_RESULTS)
	q := strings.Repeat("SET NAMES utf8mb4; ", maxSplitPieces+8) + "UPDATE g SET v = v + 1 WHERE id = 1"
	r.send(append([]byte{mysql.COM_QUERY}, q...)...)
	got := responsePackets(r)
	if len(got) != maxSplitPieces+1 {
		t.Fatalf("%d packets, want %d OKs and an ERR", len(got), maxSplitPieces)
	}
	for i, pk := range got[:maxSplitPieces] {
		if st, ok := okStatus(pk); pk[0] != mysql.OK_HEADER || !ok || st&mysql.SERVER_MORE_RESULTS_EXISTS == 0 {
			t.Fatalf("packet %d: %x, want an OK saying more results follow", i, pk)
		}
	}
	if err := r.c.HandleErrorPacket(got[maxSplitPieces]); err == nil || !strings.Contains(err.Error(), "lockproxy:") {
		t.Fatalf("last packet: %v, want lockproxy's refusal", err)
	}
	rows, err := r.query("SELECT v FROM g WHERE id = 1")
	wantRows(t, "the row after the refused text", rows, err, "10")
}

// TestReportsTurnedOffUnseen: a stored function may turn the server's
// reports off, and MariaDB says nothing of it (no state, no flag with
// CLIENT_DEPRECATE_EOF). A session that then changes its database must
// still be read under the new one: here the unkeyed UPDATE of the guarded
// table, after a USE the server no longer reports, is refused, not sent
// as an UPDATE of a table lockproxy took for another database's.
func TestReportsTurnedOffUnseen(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)", "INSERT INTO sku VALUES (1, 10)",
		"CREATE FUNCTION lockproxy_quiet() RETURNS INT NO SQL BEGIN "+
			"SET SESSION session_track_system_variables = ''; SET SESSION session_track_schema = OFF; RETURN 1; END",
		"CREATE TABLE noisy (id INT)",
		"CREATE TRIGGER noisy_quiet BEFORE INSERT ON noisy FOR EACH ROW SET SESSION session_track_schema = OFF")
	p := guardedProxy(t, db, nil)
	for _, c := range []struct {
		name, quiet  string
		deprecateEOF bool
	}{
		{"function", "SELECT `" + db + "`.lockproxy_quiet()", false},
		{"function/deprecate_eof", "SELECT `" + db + "`.lockproxy_quiet()", true},
		{"trigger/deprecate_eof", "INSERT INTO `" + db + "`.noisy VALUES (1)", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := dialRaw(t, p.addr, p.bed.User, p.bed.Password, db, c.deprecateEOF)
			for _, q := range []string{"USE information_schema", c.quiet, "USE `" + db + "`"} {
				if _, err := r.query(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			_, err := r.query("UPDATE sku SET stock = stock + 1")
			if me := myErr(t, err); me.Code != 1105 || !strings.HasPrefix(me.Message, "lockproxy: rule sku-stock") {
				t.Fatalf("unkeyed UPDATE of the guarded table: want lockproxy's 1105, got %v", me)
			}
			var stock int
			if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = 1").Scan(&stock); err != nil || stock != 10 {
				t.Fatalf("stock %d (%v), want 10: the refused UPDATE ran", stock, err)
			}
		})
	}
}

// TestClientTrackingPackets: MariaDB is the oracle of what a client's OK
// packets carry. The same statements (USE, SET of variables the session
// tracks and of others, a user variable, a temporary table, BEGIN and
// COMMIT, and the client's own changes of session_track_*) are sent
// directly and through lockproxy with no rules, with a rule, and with a
// replica, with and without CLIENT_SESSION_TRACK: every packet of every
// response is the same byte for byte (status flags, info, session state).
func TestClientTrackingPackets(t *testing.T) {
	bed := testbedFor(t)
	base := startProxy(t, nil)
	db := freshNamedDB(t, base, dbName(t, "a"))
	testbed.MustExec(t, base.direct(t, db, ""), "CREATE TABLE g (id INT PRIMARY KEY, v INT)", "INSERT INTO g VALUES (1, 10), (2, 20)")
	proxies := map[string]*testProxy{
		"no rules": base,
		"rule": startProxyWith(t, func(c *rules.Config) {
			c.Rules = []rules.Rule{{Name: "g", Table: db + ".g", Key: []string{"id"},
				Lock:      []string{rules.LockWrite, rules.LockLockingRead, rules.LockReadInTxn},
				OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(2 * time.Second)}}
		}, memlock.New(nil, nil)),
		"replica": startProxy(t, func(c *rules.Config) { c.Backends.Replicas = []string{bed.ReplicaAddr} }),
	}
	waitReplica(t, proxies["replica"])
	use := "USE `" + db + "`"
	texts := []string{
		"USE information_schema", use, "SET @a = 1", "SET wait_timeout = 100", "SET autocommit = 0", "SET autocommit = 1",
		"SET sql_mode = 'ANSI_QUOTES'", "SET sql_mode = DEFAULT", "SET NAMES latin1", "SET NAMES utf8mb4",
		"SET collation_connection = utf8mb4_bin", "SET time_zone = '+01:00'", "SELECT @b := 2", "SELECT v FROM g WHERE id = 1",
		"BEGIN", "UPDATE g SET v = v + 1 WHERE id = 1", "COMMIT", "CREATE TEMPORARY TABLE tt (a INT)", "INSERT INTO tt VALUES (1)",
		// The client's own tracking, as it sets it.
		"SET session_track_state_change = ON", "SET @a = 2", use, "SET sql_mode = 'ANSI_QUOTES'", "SET sql_mode = DEFAULT",
		"SET session_track_state_change = OFF", "SET @a = 3",
		"SET session_track_schema = OFF", "USE information_schema", "SET session_track_schema = ON", use,
		"SET session_track_system_variables = 'sql_mode'", "SET sql_mode = 'ANSI_QUOTES'", "SET autocommit = 1",
		"SET session_track_system_variables = DEFAULT", "SET sql_mode = DEFAULT", "SET autocommit = 1",
		"SET session_track_system_variables = '*'", "SET wait_timeout = 200", "SET NAMES latin1",
		"SET session_track_system_variables = 'autocommit,session_track_system_variables'", "SET NAMES utf8mb4", "SET autocommit = 1",
		"SET session_track_system_variables = ''", "SET autocommit = 1",
		"SET session_track_transaction_info = CHARACTERISTICS", "BEGIN", "UPDATE g SET v = v + 1 WHERE id = 2", "COMMIT",
		"SET session_track_transaction_info = OFF", "SET session_track_system_variables = DEFAULT",
		"SET session_track_state_change = ON, session_track_schema = OFF", "USE information_schema", use,
		"SET session_track_state_change = DEFAULT, session_track_schema = DEFAULT", use,
		"SET @a = 4; USE information_schema; SET autocommit = 1", use,
	}
	for _, path := range []string{"no rules", "rule", "replica"} {
		for _, track := range []bool{false, true} {
			for _, deprecateEOF := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/session_track=%v/deprecate_eof=%v", path, track, deprecateEOF), func(t *testing.T) {
					caps := []uint32{mysql.CLIENT_MULTI_STATEMENTS, mysql.CLIENT_MULTI_RESULTS}
					if track {
						caps = append(caps, mysql.CLIENT_SESSION_TRACK)
					}
					run := func(addr string) [][][]byte {
						testbed.MustExec(t, base.direct(t, db, ""), "UPDATE g SET v = id * 10")
						r := dialRaw(t, addr, bed.User, bed.Password, db, deprecateEOF, caps...)
						var out [][][]byte
						for _, q := range texts {
							r.send(append([]byte{mysql.COM_QUERY}, q...)...)
							out = append(out, responsePackets(r))
						}
						return out
					}
					direct, proxied := run(bed.PrimaryAddr), run(proxies[path].addr)
					if track {
						// The client's tracking changed by a prepared
						// statement: its execute's OK and the next texts'.
						prepared := func(addr string) [][][]byte {
							r := dialRaw(t, addr, bed.User, bed.Password, db, deprecateEOF, caps...)
							id, _ := r.prepare("SET session_track_system_variables = 'sql_mode'")
							r.send(append(stmtPayload(mysql.COM_STMT_EXECUTE, id, 0), 1, 0, 0, 0)...)
							out := [][][]byte{responsePackets(r)}
							for _, q := range []string{"SET sql_mode = 'ANSI_QUOTES'", "SET autocommit = 1", "SET sql_mode = DEFAULT"} {
								r.send(append([]byte{mysql.COM_QUERY}, q...)...)
								out = append(out, responsePackets(r))
							}
							return out
						}
						sorted := func(rs [][][]byte) [][][]byte {
							for _, r := range rs {
								for i := range r {
									r[i] = sortedVars(r[i])
								}
							}
							return rs
						}
						if d, p := sorted(prepared(bed.PrimaryAddr)), sorted(prepared(proxies[path].addr)); !reflect.DeepEqual(d, p) {
							t.Errorf("after a prepared SET of session_track_system_variables: through lockproxy\n%q\ndirectly\n%q", p, d)
						}
					}
					for k, q := range texts {
						want, got := direct[k], proxied[k]
						if len(got) != len(want) {
							t.Fatalf("%d %s: %d packets through lockproxy, %d directly:\n%q\n%q", k, q, len(got), len(want), got, want)
						}
						for i := range want {
							if !bytes.Equal(sortedVars(got[i]), sortedVars(want[i])) {
								t.Errorf("%d %s: packet %d through lockproxy\n%q\ndirectly\n%q", k, q, i, got[i], want[i])
							}
						}
					}
				})
			}
		}
	}
}

func TestMentionsTracking(t *testing.T) {
	for q, want := range map[string]bool{
		"SET session_track_schema = OFF": true, "set SESSION_TRACK_state_change=1": true, "SELECT @@Session_Track_System_Variables": true,
		"SET @a = 1": false, "SELECT session_id": false, "_track": false, "session_trac": false, "x_session_track": true, "": false,
	} {
		if got := mentionsTracking([]byte(q)); got != want {
			t.Errorf("mentionsTracking(%q) = %v, want %v", q, got, want)
		}
	}
}

// sortedVars returns packet p with the system-variable entries of its
// session state in byte order: MariaDB writes them in the order of a hash
// of its own, which differs between a session tracking the client's list
// and lockproxy's longer one (and between server runs). Anything else is
// returned as it is.
func sortedVars(p []byte) []byte {
	if len(p) == 0 || p[0] != mysql.OK_HEADER {
		return p
	}
	at, info, state, ok := okParts(p)
	if !ok || len(state) == 0 {
		return p
	}
	var vars, rest [][]byte
	for pos := 0; pos < len(state); {
		_, next, err := readLenEncBytes(state, pos+1)
		if err != nil {
			return p
		}
		if state[pos] == trackSystemVariables {
			vars = append(vars, state[pos:next])
		} else {
			rest = append(rest, state[pos:next])
		}
		pos = next
	}
	slices.SortFunc(vars, bytes.Compare)
	out := append([]byte(nil), p[:at+4]...)
	out = appendLenEncInt(out, uint64(len(info)))
	out = append(out, info...)
	block := bytes.Join(append(vars, rest...), nil)
	out = appendLenEncInt(out, uint64(len(block)))
	return append(out, block...)
}
