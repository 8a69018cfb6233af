package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/lockproxy/lockproxy/proxy"
	"github.com/lockproxy/lockproxy/rules"
)

// checkWorkload prints what lockproxy would do with each statement shape
// of a MariaDB general query log (`lockproxy check`), planned as
// `lockproxy explain` plans one statement. It reads no server.
func checkWorkload(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lockproxy check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "rules.yaml", "path to rules.yaml")
	logPath := fs.String("log", "", "MariaDB general or slow query log to read (- for stdin)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *logPath == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: lockproxy check --config rules.yaml --log general.log|slow.log")
		return 2
	}
	cfg, err := rules.Load(*configPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	rs, err := rules.Compile(cfg, rules.Schema{})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	in := io.Reader(os.Stdin)
	if *logPath != "-" {
		f, err := os.Open(*logPath)
		if err != nil {
			fmt.Fprintln(stderr, "lockproxy:", err)
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
		fmt.Fprintln(stderr, "lockproxy:", err)
		return 1
	}
	w.Print(stdout)
	return 0
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
