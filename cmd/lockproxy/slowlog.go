package main

import (
	"bufio"
	"bytes"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/lockproxy/lockproxy/proxy"
)

// isSlowLog reports whether the log br starts is a MariaDB slow query log
// (entries headed by "# User@Host:" or "# Time:" lines) rather than a
// general query log; it looks at the first 64 KiB without consuming them.
func isSlowLog(br *bufio.Reader) bool {
	head, _ := br.Peek(64 << 10)
	return bytes.HasPrefix(head, []byte("# Time: ")) || bytes.HasPrefix(head, []byte("# User@Host: ")) ||
		bytes.Contains(head, []byte("\n# Time: ")) || bytes.Contains(head, []byte("\n# User@Host: "))
}

// slowThread matches an entry's "# Thread_id: 12  Schema: shop" line.
var slowThread = regexp.MustCompile(`^# Thread_id: (\d+)\s+Schema: (\S*)`)

// slowTimestamp matches the "SET timestamp=...;" line the server writes
// before each statement.
var slowTimestamp = regexp.MustCompile(`^SET timestamp=\d+;$`)

// readSlowLog feeds the statements of a MariaDB slow query log to w, each
// in its thread's database. The log has one entry per statement that ran
// (with long_query_time = 0, every statement), written when it ended: an
// EXECUTE is logged as the statement it ran, with its values.
func readSlowLog(r io.Reader, w *proxy.Workload) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var (
		thread uint64
		schema string
		text   []string
	)
	flush := func() {
		sql := strings.TrimSpace(strings.Join(text, "\n"))
		text = text[:0]
		sql = strings.TrimSpace(strings.TrimSuffix(sql, ";"))
		if sql == "" {
			return
		}
		w.UseDB(thread, schema)
		w.Statement(thread, sql)
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# "):
			if len(text) > 0 {
				flush()
			}
			if m := slowThread.FindStringSubmatch(line); m != nil {
				thread, _ = strconv.ParseUint(m[1], 10, 64)
				schema = m[2]
			}
		case len(text) == 0 && (slowTimestamp.MatchString(line) || strings.HasPrefix(line, "use ") && strings.HasSuffix(line, ";")):
			// Written by the server before the statement, not run by the
			// client (the entry's Schema says the database).
		case len(text) == 0 && isLogHeader(line):
		default:
			text = append(text, line)
		}
	}
	if len(text) > 0 {
		flush()
	}
	return sc.Err()
}

// isLogHeader reports whether line is one of the three lines the server
// writes at the top of a log file it opens.
func isLogHeader(line string) bool {
	return strings.Contains(line, ", Version: ") && strings.HasSuffix(line, "started with:") ||
		strings.HasPrefix(line, "Tcp port: ") || strings.HasPrefix(line, "Time") && strings.HasSuffix(line, "Argument")
}
