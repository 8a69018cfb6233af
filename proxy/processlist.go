package proxy

import (
	"strconv"
	"strings"
)

// SHOW PROCESSLIST through lockproxy. MariaDB lists the thread ids of
// lockproxy's backend connections; a client knows its connection by the
// id lockproxy's greeting gave it (CONNECTION_ID(), the drivers'
// thread_id), and KILL takes that id. So in the answer to SHOW [FULL]
// PROCESSLIST the Id of a row that is the primary connection of a session
// of this lockproxy becomes that session's id, which KILL then finds;
// every other row (another lockproxy's session, a pooled connection no
// session holds, a direct client) keeps MariaDB's id.
// information_schema.PROCESSLIST and performance_schema are not rewritten
// (README, Connection ids).

// isShowProcesslist reports whether q is SHOW [FULL] PROCESSLIST alone.
func isShowProcesslist(q []byte) bool {
	if len(q) > 64 || !containsFolded(q, "processlist") {
		return false // most texts: no allocation
	}
	w := strings.Fields(strings.ToLower(strings.TrimSuffix(strings.TrimSpace(string(q)), ";")))
	switch len(w) {
	case 2:
		return w[0] == "show" && w[1] == "processlist"
	case 3:
		return w[0] == "show" && w[1] == "full" && w[2] == "processlist"
	}
	return false
}

// sessionThreads maps the backend thread id of each session's primary
// connection to the session's id. Safe for concurrent use.
func (s *Server) sessionThreads() map[uint64]uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[uint64]uint32, len(s.sessions))
	for id, ss := range s.sessions {
		if t := ss.pub.thread.Load(); t != 0 {
			m[uint64(t)] = id
		}
	}
	return m
}

// ownRowID returns a text result row with its first column, a thread id
// in threads, replaced by the session id it maps to; other rows as they
// are.
func ownRowID(p []byte, threads map[uint64]uint32) []byte {
	if len(p) == 0 || p[0] >= 0xfb { // NULL, or not a short value: not an id
		return p
	}
	v, next, err := readLenEncString(p, 0)
	if err != nil {
		return p
	}
	t, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return p
	}
	id, ok := threads[t]
	if !ok {
		return p
	}
	out := appendLenEncString(make([]byte, 0, len(p)+8), strconv.FormatUint(uint64(id), 10))
	return append(out, p[next:]...)
}
