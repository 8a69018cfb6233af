package proxy

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/lockmgr"
)

// clientCases are the sentinel errors of lockproxy's packages that can
// reach a client, each as it gets there, with the code and SQLSTATE the
// client must see. Name a sentinel as package.name.
var clientCases = []struct {
	name  string
	err   error
	code  uint16
	state string
}{
	{"proxy.errTooManyConnections", errorf(errTooManyConnections, "Too many connections"), 1040, "08004"},
	{"proxy.errTooManyUserConnections", errorf(errTooManyUserConnections, "User app already has more than 'users[].max_connections' (2) active connections"), 1203, "42000"},
	{"proxy.errAccessDenied", errorf(errAccessDenied, "Access denied for user 'u'@'h' (using password: YES)"), 1045, "28000"},
	{"proxy.errAuthMode", errorf(errAuthMode, "account 'u'@'%%' logs in with unix_socket; lockproxy serves only mysql_native_password accounts from the primary (list the user under users: instead)"), 1251, "08004"},
	{"proxy.errAmbiguousHost", errorf(errAccessDenied, "Access denied for user 'u'@'h': %w; lockproxy cannot tell which MariaDB would use (users.from_backend)", errAmbiguousHost), 1045, "28000"},
	{"proxy.errHostBlocked", errorf(errHostBlocked, "Host 'h' is blocked because of many failed logins; try again later"), 1129, "HY000"},
	{"proxy.errHandshake", errorf(errHandshake, "bad handshake"), 1043, "08S01"},
	{"proxy.errBadCommand", errorf(errBadCommand, "empty command packet"), 1047, "08S01"},
	{"proxy.errShutdown", errorf(errShutdown, "server shutdown in progress"), 1053, "08S01"},
	{"proxy.errPacketTooLarge", errPacketTooLarge, 1153, "08S01"},
	{"proxy.errStatementTooLong", errorf(errStatementTooLong, "statement too long to analyse: 9 bytes"), 1105, "HY000"},
	{"proxy.errSyntax", errorf(errSyntax, "SHOW LOCKPROXY takes LOCKS, STATUS, RULES or OBSERVED"), 1064, "42000"},
	{"proxy.errNeedProcess", errorf(errNeedProcess, "Access denied; you need (at least one of) the PROCESS privilege(s) for SHOW LOCKPROXY OBSERVED"), 1227, "42000"},
	{"proxy.errTooDeepNesting", errorf(errTooDeepNesting, "Too high level of nesting for select"), 1473, "HY000"},
	{"proxy.errOutOfMemory", outOfMemory("a client packet", 1), 1041, "HY000"},
	{"proxy.errWrongArguments", errorf(errWrongArguments, "Incorrect arguments to mysqld_stmt_execute"), 1210, "HY000"},
	{"proxy.errBadParams", fmt.Errorf("%w: parameter 1: %v", errBadParams, errShortPacket), 1105, "HY000"},
	{"proxy.errNoParamTypes", errorf(errNoParamTypes, "statement 1 executed without parameter types: Malformed communication packet"), 1835, "HY000"},
	{"proxy.errUnknownStmt", errorf(errUnknownStmt, "Unknown prepared statement handler (7) given to mysqld_stmt_execute"), 1243, "HY000"},
	{"proxy.errUnknownThread", errorf(errUnknownThread, "Unknown thread id: 7"), 1094, "HY000"},
	{"proxy.errKillIdle", errorf(errKillIdle, "connection 7 belongs to another user"), 1105, "HY000"},
	{"proxy.errRejected", errorf(errRejected, "rule r: cannot derive the row keys of t (a range); on_unkeyed: reject"), 1105, "HY000"},
	{"proxy.errRaceLost", errorf(errRaceLost, `rule "r" key "k": stock changed after it was read`), 1213, "40001"},
	{"proxy.errConstraint", errorf(errConstraint, `CONSTRAINT stock >= 0 failed for rule "r" key "k"`), 4025, "23000"},
	{"proxy.errPrimaryUnreachable", backendDialError(errors.New("dial tcp: connection refused")), 2003, "HY000"},
	{"proxy.errReplicaUnreachable", errorf(errReplicaUnreachable, "cannot reach replica %s to stop the query of connection %d: %v", "127.0.0.1:1", 7, errors.New("connection refused")), 2003, "HY000"},
	{"proxy.errDiagnosticsLost", errorf(errDiagnosticsLost, "the replica connection that ran the previous statement failed; its warnings and errors are lost (%v)", errors.New("EOF")), 1105, "HY000"},
	{"proxy.errPoolExhausted", errorf(errPoolExhausted, "no connection to the primary %s came free within backends.pool.wait_timeout (%v): backends.pool.max_connections (%d) are in use", "127.0.0.1:3306", "5s", 20), 1105, "HY000"},
	{"proxy.errStateElsewhere", errorf(errStateElsewhere, "%s reads what the previous statement left on its backend connection, which backends.pool.multiplex gave back: run both in one transaction or text", "FOUND_ROWS()"), 1105, "HY000"},
	// A stale fencing token reaches the client as the lease it proves lost.
	{"proxy.errFenced", fmt.Errorf("%w: %w (rule %q key %q token %d)", lockmgr.ErrLeaseLost, errFenced, "r", "k", 3), 1213, "40001"},

	{"lockmgr.ErrWaitTimeout", lockmgr.WaitError(expired(), lockmgr.Key{Rule: "r", Name: "k"}), 1205, "HY000"},
	{"lockmgr.ErrDeadlock", fmt.Errorf("%w: wounded by an older transaction; transaction rolled back", lockmgr.ErrDeadlock), 1213, "40001"},
	{"lockmgr.ErrLeaseLost", fmt.Errorf(`rule %q key %q: %w: lease expired; transaction rolled back`, "r", "k", lockmgr.ErrLeaseLost), 1213, "40001"},
	{"lockmgr.ErrUnavailable", fmt.Errorf("rule r: lock service unavailable, statement not run (%w)", lockmgr.ErrUnavailable), 1105, "HY000"},
	{"lockmgr.ErrClosed", fmt.Errorf("rule r: lock service unavailable, statement not run (%w)", lockmgr.ErrClosed), 1105, "HY000"},
	{"lockmgr.ErrInvalidKey", fmt.Errorf("rule r: lock service unavailable, statement not run (%w)", lockmgr.ErrInvalidKey), 1105, "HY000"},
}

// internalOnly are the sentinels that never reach a client, and why.
var internalOnly = map[string]string{
	"proxy.errPrimaryGone":         "ends the session; the client's connection is reset as MariaDB resets it",
	"proxy.errNoRow":               "an internal query's answer, read by lockproxy",
	"proxy.errNoAccount":           "a refused login's reason, answered as errAccessDenied in MariaDB's words (loginFailed)",
	"proxy.errWrongPassword":       "a refused login's reason, answered as errAccessDenied in MariaDB's words (loginFailed)",
	"proxy.errQuit":                "the client quit; nothing is answered",
	"proxy.errCombineUnknown":      "ends the session: its client sees the connection close (2013), as after a COMMIT whose connection died",
	"proxy.errBatchAbandoned":      "a combined batch that ran nothing: its statements run alone and get their own answers",
	"proxy.errBadSequence":         "a broken packet stream ends the session",
	"proxy.errShortPacket":         "read inside parameter decoding, answered as errBadParams",
	"proxy.errDraining":            "what the readiness check reports",
	"proxy.errServiceAway":         "always wrapped with lockmgr.ErrWaitTimeout (serviceAway): answered as 1205",
	"proxy.errReleasePending":      "only the cause inside serviceAway's lockmgr.ErrWaitTimeout: answered as 1205",
	"proxy.errNoObserver":          "observe mode's check logs it; the statement runs as it would without lockproxy",
	"lockmgr.ErrReleased":          "Set.Err skips released leases",
	"rules.ErrBadKey":              "decoding lock names for SHOW LOCKPROXY LOCKS and the ledger",
	"rules.ErrNoConfig":            "compiling rules at start or reload",
	"rules.ErrInvalidConfig":       "loading rules.yaml at start or reload, told to the operator",
	"rules.ErrUnkeyable":           "becomes the reason of a rejection, answered as errRejected",
	"parser.ErrInternal":           "a statement the parser cannot read is marked Unparsed",
	"parser.errParserPanic":        "a statement the parser cannot read is marked Unparsed",
	"parser.ErrRewriteSpec":        "a failed rewrite is logged and the statement runs as sent",
	"parser.ErrRewriteParams":      "a failed rewrite is logged and the statement runs as sent",
	"router.ErrNotChecked":         "replica health: the statement goes to the primary",
	"router.ErrNotReplica":         "replica health: the statement goes to the primary",
	"router.ErrReplicationStopped": "replica health: the statement goes to the primary",
	"router.ErrLagUnknown":         "replica health: the statement goes to the primary",
	"router.ErrLagging":            "replica health: the statement goes to the primary",
	"router.ErrMarkedDown":         "replica health: the statement goes to the primary",
	"router.ErrCheckFailed":        "replica health: the statement goes to the primary",
	"router.ErrBadGTID":            "replica health: the statement goes to the primary",
}

func expired() context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	cancel()
	return ctx
}

// TestEveryErrorMapped fails when a sentinel error of proxy, lockmgr,
// rules, parser or router is neither mapped for clients (a row of
// clientErrors and a case of clientCases) nor listed in internalOnly, and
// checks that each mapped error reaches the client with its code,
// SQLSTATE and a message of lockproxy's own.
func TestEveryErrorMapped(t *testing.T) {
	covered := map[error]bool{}
	mapped := map[string]bool{}
	for _, tc := range clientCases {
		mapped[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			row, ok := clientErrorOf(tc.err)
			if !ok {
				t.Fatalf("%v has no row in clientErrors: it would reach the client as 1105", tc.err)
			}
			covered[row.err] = true
			se := toSQLError(tc.err)
			if se.Code != tc.code || se.State != tc.state {
				t.Errorf("%v: got %d (%s), want %d (%s)", tc.err, se.Code, se.State, tc.code, tc.state)
			}
			if !strings.HasPrefix(se.Msg, "lockproxy: ") || strings.HasPrefix(se.Msg, "lockproxy: lockproxy:") {
				t.Errorf("message %q does not begin with one lockproxy:", se.Msg)
			}
		})
	}
	for _, row := range clientErrors {
		if !covered[row.err] {
			t.Errorf("row %v of clientErrors has no case in clientCases", row.err)
		}
	}
	for _, name := range sentinels(t) {
		if !mapped[name] && internalOnly[name] == "" {
			t.Errorf("sentinel %s: give it a row in clientErrors and a case in clientCases, or say in internalOnly why it never reaches a client", name)
		}
	}
}

// TestClientMessages pins the exact text clients read for errors whose
// words lockproxy composes from several parts.
func TestClientMessages(t *testing.T) {
	wait := lockmgr.WaitError(expired(), lockmgr.Key{Rule: "r", Name: "k"})
	lost := fmt.Errorf("rule %q key %q: %w", "r", "k", fmt.Errorf("%w: lease expired", lockmgr.ErrLeaseLost))
	backend := &sqlError{Code: 1062, State: "23000", Msg: "Duplicate entry '1' for key 'PRIMARY'"}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"wait timeout", wait, `ERROR 1205 (HY000): lockproxy: Lock wait timeout exceeded; try restarting transaction (lockmgr: wait timeout: rule "r" key "k": context deadline exceeded)`},
		{"lease lost", fmt.Errorf("%w; transaction rolled back", lost), `ERROR 1213 (40001): lockproxy: Deadlock found when trying to get lock; try restarting transaction (rule "r" key "k": lockmgr: lease lost: lease expired; transaction rolled back)`},
		{"unavailable", fmt.Errorf("rule %s: lock service unavailable, statement not run (%w)", "r", fmt.Errorf("%w: redis: dial", lockmgr.ErrUnavailable)), `ERROR 1105 (HY000): lockproxy: rule r: lock service unavailable, statement not run (lockmgr: unavailable: redis: dial)`},
		{"packet too large", errPacketTooLarge, `ERROR 1153 (08S01): lockproxy: got a packet bigger than 'max_allowed_packet' bytes`},
		{"own words", errorf(errUnknownThread, "Unknown thread id: %d", 7), `ERROR 1094 (HY000): lockproxy: Unknown thread id: 7`},
		{"bad parameters", fmt.Errorf("%w: parameter 2: %v", errBadParams, errShortPacket), `ERROR 1105 (HY000): lockproxy: proxy: malformed COM_STMT_EXECUTE parameters: parameter 2: proxy: malformed packet`},
		{"primary unreachable", backendDialError(errors.New("dial tcp: refused")), `ERROR 2003 (HY000): lockproxy: cannot connect to the primary: dial tcp: refused`},
		{"backend", fmt.Errorf("relaying: %w", backend), `ERROR 1062 (23000): Duplicate entry '1' for key 'PRIMARY'`},
		{"backend via go-mysql", mysql.NewError(1146, "Table 'shop.x' doesn't exist"), `ERROR 1146 (42S02): Table 'shop.x' doesn't exist`},
		{"backend dial refusal", backendDialError(backend), `ERROR 1062 (23000): Duplicate entry '1' for key 'PRIMARY'`},
		{"anything else", errors.New("boom"), `ERROR 1105 (HY000): lockproxy: boom`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := toSQLError(tc.err).Error(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// sentinels lists the package-level errors.New values of the packages
// whose errors can reach lockproxy's clients, as package.name.
func sentinels(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{".", "../lockmgr", "../rules", "../parser", "../router"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fileSentinels(f)...)
		}
	}
	if len(out) < 20 {
		t.Fatalf("found only %d sentinels: %v", len(out), out)
	}
	return out
}

func fileSentinels(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, v := range vs.Values {
				if call, ok := v.(*ast.CallExpr); ok && isErrorsNew(call.Fun) && i < len(vs.Names) {
					out = append(out, f.Name.Name+"."+vs.Names[i].Name)
				}
			}
		}
	}
	return out
}

func isErrorsNew(fun ast.Expr) bool {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "errors" && sel.Sel.Name == "New"
}
