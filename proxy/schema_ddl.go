package proxy

// DDL the session runs: which statements make the schema be read again,
// that read in the background, and the session's next plan waiting for it.

import (
	"strings"

	"github.com/lockproxy/lockproxy/parser"
)

// schemaDDL reports whether an holds DDL after which the schema is read
// again (see track and refreshesAfter), which the other instances
// sharing the lock service are then told of.
func (s *Server) schemaDDL(an *parser.Analysis) bool {
	if an == nil || !readsSchema(s.config()) {
		return false
	}
	for _, f := range an.Stmts {
		if f.Kind == parser.KindDDL && s.refreshesAfter(f.Text) {
			return true
		}
	}
	return an.Unparsed && an.LexKind == parser.KindDDL && s.refreshesAfter(an.SQL)
}

// refreshesAfter reports whether the schema is read again after the DDL
// ddl succeeded (refreshSchemaAsync). Temporary tables are not in the
// schema lockproxy reads, and without rules, replicas or multiplexing
// nothing reads it; with multiplexing alone only its stored routines and
// views matter (rules.RuleSet.MayReadPrevious), so only DDL that may
// name one makes it be read again.
func (s *Server) refreshesAfter(ddl string) bool {
	cfg := s.config()
	switch {
	case !readsSchema(cfg) || temporaryDDL(ddl):
		return false
	case len(cfg.Rules) > 0 || len(cfg.Backends.Replicas) > 0:
		return true
	}
	return namesRoutineOrView(ddl)
}

// namesRoutineOrView reports whether ddl has a word that may make it
// change a stored routine, a view or a trigger (which may call them):
// lexical, so a table with a column named view counts too.
func namesRoutineOrView(ddl string) bool {
	for _, w := range parser.LexNames(ddl) {
		switch w {
		case "function", "procedure", "view", "trigger", "database", "schema", "package":
			return true
		}
	}
	return false
}

// temporaryDDL reports whether ddl creates or drops a temporary table or
// sequence (CREATE [OR REPLACE] TEMPORARY ..., DROP TEMPORARY ...), not
// whether the word appears: a routine or trigger whose body makes a
// temporary table is part of the schema.
func temporaryDDL(ddl string) bool {
	w := strings.Fields(strings.ToLower(ddl))
	switch {
	case len(w) < 2 || w[0] != "create" && w[0] != "drop":
		return false
	case w[1] == "temporary":
		return true
	}
	return len(w) > 3 && w[1] == "or" && w[2] == "replace" && w[3] == "temporary"
}

// refreshSchemaAsync re-reads the schema after DDL in the background and,
// unless relay told them before the client had its OK (exchange.ddlWord),
// tells the other instances sharing the lock service to at the same time
// (announceSchemaChange); both are counted with the session's server so
// that Shutdown waits for them (the session itself is counted while it
// runs, so the count cannot be zero).
// The client has its OK at once; the next plan of every session waits for
// the read (awaitSchema), so the statement after a CREATE TABLE or CREATE
// VIEW is keyed with the new table's column types and meets the rules
// through the new view. A session's reads run one after another, so the
// last one stored is the one its last DDL started.
func (d *ddlRead) refreshSchemaAsync(srv *Server, x *exchange) {
	prev, done := d.done, make(chan struct{})
	d.done = done
	srv.schemaReads.begin()
	if !x.ddlAnnounced {
		x.ddlAnnounced = true // once for all the DDL of a text
		srv.wg.Add(1)
		go func() {
			defer srv.wg.Done()
			srv.announceSchemaChange()
		}()
	}
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		defer close(done)
		defer srv.schemaReads.end()
		if prev != nil {
			<-prev
		}
		srv.refreshSchema()
	}()
}

// awaitSchema waits for the schema reads after DDL still running: the
// one the session's last DDL started, and any another session or another
// instance's announced DDL started (each gives up within the schema read's
// timeouts).
func (d *ddlRead) awaitSchema(srv *Server) {
	if d.done != nil {
		<-d.done
		d.done = nil
	}
	srv.schemaReads.await()
}

// ddlRead is the schema read after a session's last DDL: done is closed
// when what it read has been stored (nil: none pending); the session's
// next plan waits for it (awaitSchema).
type ddlRead struct {
	done chan struct{}
}
