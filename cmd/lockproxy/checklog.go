package main

import (
	"bufio"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/proxy"
	"github.com/lockproxy/lockproxy/rules"
)

// checkWorkload prints what lockproxy would do with each statement shape
// of a MariaDB general query log (`lockproxy check`), planned as
// `lockproxy explain` plans one statement. It reads no server unless
// --dsn names one to read the schema from.
func checkWorkload(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lockproxy check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "rules.yaml", "path to rules.yaml")
	logPath := fs.String("log", "", "MariaDB general or slow query log to read (- for stdin)")
	dsn := fs.String("dsn", "", "read the schema (columns, keys, collations, views, routines, triggers) from this server: user:password@tcp(host:port)/")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *logPath == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: lockproxy check --config rules.yaml --log general.log|slow.log")
		return 2
	}
	cfg, err := rules.Load(*configPath)
	if err != nil {
		printErr(stderr, err)
		return 1
	}
	schema, closeSchema, err := checkSchema(*dsn, cfg, stderr)
	if err != nil {
		printErr(stderr, err)
		return 1
	}
	defer closeSchema()
	rs, err := rules.Compile(cfg, schema)
	if err != nil {
		printErr(stderr, err)
		return 1
	}
	in := io.Reader(os.Stdin)
	if *logPath != "-" {
		f, err := os.Open(*logPath)
		if err != nil {
			printErr(stderr, err)
			return 1
		}
		defer f.Close()
		in = f
	}
	w := proxy.NewWorkload(rs, len(cfg.Backends.Replicas) > 0)
	br := bufio.NewReaderSize(in, 64<<10)
	read := readGeneralLog
	if isSlowLog(br) {
		read = readSlowLog
	}
	if err := read(br, w); err != nil {
		printErr(stderr, err)
		return 1
	}
	w.Print(stdout)
	return 0
}

// checkSchema reads the schema check plans with from the server dsn names
// (the zero Schema when dsn is empty), as lockproxy reads the primary's:
// the guarded tables' columns, keys and collations, and the views,
// routines and triggers; text keys are asked of the server. A rule that
// does not fit its table is a warning. done ends the connections.
func checkSchema(dsn string, cfg *rules.Config, stderr io.Writer) (schema rules.Schema, done func(), err error) {
	if dsn == "" {
		return rules.Schema{}, func() {}, nil
	}
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return rules.Schema{}, nil, fmt.Errorf("--dsn: %w", err)
	}
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return rules.Schema{}, nil, fmt.Errorf("--dsn: %w", err)
	}
	db := sql.OpenDB(connector)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schema, problems, err := rules.LoadSchema(ctx, db, cfg)
	if err != nil {
		db.Close()
		return rules.Schema{}, nil, fmt.Errorf("reading the schema from --dsn: %w", err)
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "lockproxy: warning: %s\n", p)
	}
	return schema.WithTextServer(rules.NewTextServer(db)), func() { db.Close() }, nil
}

// generalLogEntry matches the start of an entry of MariaDB's general query
// log: an optional "YYMMDD HH:MM:SS" time, the thread id, the command and,
// after a tab, its argument. A line that does not match continues the
// argument of the entry before it (a statement on several lines).
var generalLogEntry = regexp.MustCompile(`^(?:\d{6}\s+\d{1,2}:\d{2}:\d{2})?\t+\s*(\d+) ([A-Za-z][A-Za-z ]*?)\t(.*)$`)

// connectDB finds the database of a Connect entry: "user@host on db using ...".
var connectDB = regexp.MustCompile(` on (\S*)(?: using |$)`)

// logEntry is one entry of a general query log.
type logEntry struct {
	thread  uint64
	command string
	arg     string
}

// readGeneralLog feeds the sessions and statements of a general query log
// to w. A statement a session runs with EXECUTE is planned as the EXECUTE
// (what lockproxy sees), not as the Execute entry the server logs after it;
// a prepared statement of the protocol is planned as its Execute entries,
// which carry its parameters' values.
func readGeneralLog(r io.Reader, w *proxy.Workload) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var cur *logEntry
	sqlExecute := map[uint64]bool{} // the thread's last Query was EXECUTE
	flush := func() {
		if cur != nil {
			feed(w, *cur, sqlExecute)
			cur = nil
		}
	}
	for sc.Scan() {
		line := sc.Text()
		if m := generalLogEntry.FindStringSubmatch(line); m != nil {
			flush()
			id, err := strconv.ParseUint(m[1], 10, 64)
			if err != nil {
				return fmt.Errorf("general log: thread id %q: %w", m[1], err)
			}
			cur = &logEntry{thread: id, command: m[2], arg: m[3]}
			continue
		}
		if cur != nil {
			cur.arg += "\n" + line
		}
	}
	flush()
	return sc.Err()
}

func feed(w *proxy.Workload, e logEntry, sqlExecute map[uint64]bool) {
	switch e.command {
	case "Connect":
		db := ""
		if m := connectDB.FindStringSubmatch(e.arg); m != nil {
			db = m[1]
		}
		w.Connect(e.thread, db)
	case "Init DB":
		w.UseDB(e.thread, e.arg)
	case "Quit":
		w.Quit(e.thread)
	case "Query":
		sqlExecute[e.thread] = isExecute(e.arg)
		w.Statement(e.thread, e.arg)
	case "Execute":
		if sqlExecute[e.thread] {
			sqlExecute[e.thread] = false
			return
		}
		w.Statement(e.thread, e.arg)
	}
}

// isExecute reports whether a statement text is EXECUTE (not EXECUTE
// IMMEDIATE, whose text the server does not log again).
func isExecute(sql string) bool {
	f := strings.Fields(strings.ToUpper(sql))
	return len(f) >= 2 && f[0] == "EXECUTE" && f[1] != "IMMEDIATE"
}
