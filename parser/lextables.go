package parser

import "strings"

// tableKeywords are the words after which a table name follows.
var tableKeywords = map[string]bool{
	"from": true, "join": true, "update": true, "into": true, "table": true,
	"tables": true,
}

// notAlias are words that end a table reference rather than alias it.
var notAlias = map[string]bool{
	"where": true, "set": true, "join": true, "inner": true, "left": true,
	"right": true, "cross": true, "straight_join": true, "natural": true,
	"on": true, "using": true, "group": true, "order": true, "limit": true,
	"having": true, "for": true, "lock": true, "union": true, "values": true,
	"value": true, "select": true, "partition": true, "use": true, "force": true,
	"ignore": true, "read": true, "write": true, "low_priority": true,
	"window": true, "into": true, "returning": true, "default": true,
	"outfile": true, "dumpfile": true, "except": true, "intersect": true,
	"as": true, "with": true, "wait": true, "nowait": true, "skip": true,
}

// lockWords are the lock types of LOCK TABLES.
var lockWords = map[string]bool{"read": true, "local": true, "write": true, "low_priority": true}

// LexTables returns the table names a lexical scan of sql finds after FROM,
// JOIN, UPDATE, INTO, TABLE and TABLES (and comma lists after them),
// lowercased, "db.t" when qualified, in order, without duplicates. It is
// meant for text the TiDB parser rejects, so that a rule guarding a table
// can still apply its policy; it may find too many names, never parses.
// Safe for concurrent use.
func LexTables(sql string) []string { return lexTables(sql, 0) }

// lexTables is LexTables of sql read under sql_mode m.
func lexTables(sql string, m Mode) []string {
	l := lexer{s: sql, mode: m}
	var out []string
	seen := map[string]bool{}
	add := func(name string) {
		if name != "" && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	var prev token
	for {
		t, ok := l.next()
		if !ok {
			return out
		}
		if !t.punct && !t.quoted && tableKeywords[strings.ToLower(t.text)] &&
			!(prev.punct && prev.text == ".") && !updateClause(prev, t) {
			for _, name := range l.tableList() {
				add(name)
			}
			prev = token{}
			continue
		}
		prev = t
	}
}

// updateClause tells FOR UPDATE and ON DUPLICATE KEY UPDATE, after which
// no table name follows.
func updateClause(prev, t token) bool {
	return strings.EqualFold(t.text, "update") && !prev.punct &&
		(strings.EqualFold(prev.text, "for") || strings.EqualFold(prev.text, "key"))
}

// tableList reads `name [[AS] alias] [, name [[AS] alias]]...`.
func (l *lexer) tableList() []string {
	var names []string
	for {
		name, ok := l.tableName()
		if !ok {
			return names
		}
		names = append(names, name)
		save := l.i
		t, ok := l.next()
		if ok && !t.punct && strings.EqualFold(t.text, "as") {
			t, ok = l.next()
		}
		if ok && !t.punct && (t.quoted || !notAlias[strings.ToLower(t.text)]) {
			save = l.i
			t, ok = l.next()
		}
		for ok && !t.punct && lockWords[strings.ToLower(t.text)] { // LOCK TABLES a READ, b WRITE
			save = l.i
			t, ok = l.next()
		}
		if !ok || !t.punct || t.text != "," {
			l.i = save
			return names
		}
	}
}

// tableName reads `name` or `db.name`; ok is false (and nothing is
// consumed) when no identifier follows.
func (l *lexer) tableName() (string, bool) {
	save := l.i
	t, ok := l.next()
	if !ok || t.punct || (!t.quoted && (notAlias[strings.ToLower(t.text)] || isKeywordLike(t.text))) {
		l.i = save
		return "", false
	}
	name := strings.ToLower(t.text)
	save = l.i
	if dot, ok := l.next(); ok && dot.punct && dot.text == "." {
		if t2, ok := l.next(); ok && !t2.punct {
			return name + "." + strings.ToLower(t2.text), true
		}
	}
	l.i = save
	return name, true
}

// isKeywordLike rejects words that follow a table keyword without being a
// table: user variables, numbers, and modifiers.
func isKeywordLike(w string) bool {
	if w == "" || w[0] == '@' || (w[0] >= '0' && w[0] <= '9') {
		return true
	}
	switch strings.ToLower(w) {
	case "if", "exists", "not", "temporary", "only", "dual", "lateral", "status":
		return true
	}
	return false
}

// lexKinds maps a statement's first word to its kind.
var lexKinds = map[string]Kind{
	"select": KindSelect, "with": KindSelect, "insert": KindInsert,
	"replace": KindReplace, "update": KindUpdate, "delete": KindDelete,
	"create": KindDDL, "alter": KindDDL, "drop": KindDDL, "rename": KindDDL,
	"truncate": KindDDL, "begin": KindBegin, "commit": KindCommit,
	"savepoint": KindSavepoint, "set": KindSet, "use": KindUse,
	"show": KindShow, "explain": KindExplain, "describe": KindExplain,
	"desc": KindExplain, "call": KindCall, "load": KindLoadData,
	"prepare": KindPrepare, "execute": KindExecute, "deallocate": KindDeallocate,
}

// LexKind guesses the kind of the first statement of sql from its leading
// words, for text the TiDB parser rejects. Safe for concurrent use.
func LexKind(sql string) Kind { return lexKind(sql, 0) }

// lexKind is LexKind of sql read under sql_mode m.
func lexKind(sql string, m Mode) Kind {
	l := lexer{s: sql, mode: m}
	t, ok := l.next()
	for ok && t.punct && t.text == "(" {
		t, ok = l.next()
	}
	if !ok || t.punct {
		return KindOther
	}
	w := strings.ToLower(t.text)
	second := ""
	if t2, ok := l.next(); ok && !t2.punct {
		second = strings.ToLower(t2.text)
	}
	switch w {
	case "start":
		if second == "transaction" {
			return KindBegin
		}
		return KindOther
	case "rollback":
		return lexRollback(&l, second)
	case "release":
		if second == "savepoint" {
			return KindReleaseSavepoint
		}
		return KindOther
	case "lock":
		return KindLockTables
	case "unlock":
		return KindUnlockTables
	case "begin":
		if second == "not" { // BEGIN NOT ATOMIC: a compound statement
			return KindOther
		}
	}
	if k, ok := lexKinds[w]; ok {
		return k
	}
	return KindOther
}

// lexRollback tells ROLLBACK [WORK] TO [SAVEPOINT] x from ROLLBACK.
func lexRollback(l *lexer, second string) Kind {
	if second == "to" {
		return KindRollbackToSavepoint
	}
	if second == "work" {
		if t, ok := l.next(); ok && strings.EqualFold(t.text, "to") {
			return KindRollbackToSavepoint
		}
	}
	return KindRollback
}
