package proxy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/rules"
	"go.uber.org/zap"
)

const (
	analysisCacheSize = 10000
	schemaTimeout     = 5 * time.Second
)

// compileRules compiles cfg's rules with the key columns' types and
// collations read from the primary, so that values normalise as MySQL
// compares them, and with the primary's views, routines and triggers, so
// that writes through them meet the rules. When the primary cannot be
// asked, rules still compile, every statement on a guarded table is
// unkeyed (its rule's on_unkeyed decides) and a warning says so.
func (s *Server) compileRules(cfg *rules.Config, btls *tls.Config) (*rules.RuleSet, error) {
	return s.compileRulesLogged(cfg, btls, s.log)
}

// compileRulesLogged is compileRules reporting what it read to log.
func (s *Server) compileRulesLogged(cfg *rules.Config, btls *tls.Config, log *zap.Logger) (*rules.RuleSet, error) {
	if !readsSchema(cfg) {
		return rules.Compile(cfg, rules.Schema{})
	}
	schema, err := s.loadSchema(cfg, btls, log)
	if err != nil {
		s.log.Warn("cannot read the guarded tables' key columns and the views, routines and triggers from the primary; "+
			"until they can be read, the schema read before is kept, and without one every statement on a guarded table is unkeyed (on_unkeyed decides) and every CALL is refused",
			zap.Error(err))
		schema = rules.UnreadSchema(err)
	}
	return rules.Compile(cfg, schema)
}

// readsSchema reports whether cfg needs the primary's schema: rules key
// guarded tables with it, replica routing needs the views (a read of a
// view that calls a stored function stays on the primary), and
// multiplexing the stored functions (one that may read ROW_COUNT() is
// refused on a connection the previous statement did not run on:
// rules.RuleSet.MayReadPrevious).
func readsSchema(cfg *rules.Config) bool {
	return len(cfg.Rules) > 0 || len(cfg.Backends.Replicas) > 0 || cfg.Backends.Pool.Multiplex
}

func (s *Server) loadSchema(cfg *rules.Config, btls *tls.Config, log *zap.Logger) (rules.Schema, error) {
	if len(cfg.Users) == 0 {
		return rules.Schema{}, nil
	}
	connector, err := primaryConnector(cfg, btls)
	if err != nil {
		return rules.Schema{}, err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), schemaTimeout)
	defer cancel()
	schema, problems, err := rules.LoadSchema(ctx, db, cfg)
	for _, p := range problems {
		log.Warn("rule does not fit its table", zap.String("problem", p.String()))
	}
	for _, n := range schema.TextNotes() {
		log.Warn("text key collation", zap.String("note", n))
	}
	if ts, terr := s.textServer(cfg, btls); terr == nil {
		schema = schema.WithTextServer(ts)
	} else {
		log.Warn("cannot open connections to the primary for text keys; text values outside the fast path are refused", zap.Error(terr))
	}
	if objs, ok := schema.Objects(); ok {
		log.Info("read the primary's views, routines, triggers and foreign keys",
			zap.Int("views", len(objs.Views)), zap.Int("routines", len(objs.Routines)), zap.Int("triggers", len(objs.Triggers)))
	}
	return schema, err
}

// primaryConnector connects to the primary as the first configured user.
func primaryConnector(cfg *rules.Config, btls *tls.Config) (driver.Connector, error) {
	mc := mysql.NewConfig()
	mc.User, mc.Passwd, mc.Net, mc.Addr = cfg.Users[0].User, cfg.Users[0].Password, "tcp", cfg.Backends.Primary
	mc.Timeout = schemaTimeout
	mc.TLS = rules.ForAddr(btls, cfg.Backends.Primary)
	return mysql.NewConnector(mc)
}

// textServers is the pool of connections text keys are asked through
// (rules.TextServer), kept while the primary and its login stay the same.
type textServers struct {
	mu sync.Mutex
	id string
	ts *rules.TextServer
	db *sql.DB
}

// textServerConns bounds the connections text keys are asked through.
const textServerConns = 4

// textServer returns the text server for cfg's primary, opening its pool
// when the primary or its login changed (the previous pool is closed once
// the schemas that use it are long replaced).
func (s *Server) textServer(cfg *rules.Config, btls *tls.Config) (*rules.TextServer, error) {
	t := &s.texts
	t.mu.Lock()
	defer t.mu.Unlock()
	id := cfg.Backends.Primary + "\x00" + cfg.Users[0].User + "\x00" + cfg.Users[0].Password + "\x00" + fmt.Sprint(btls != nil)
	if t.ts != nil && t.id == id {
		return t.ts, nil
	}
	connector, err := primaryConnector(cfg, btls)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(textServerConns)
	db.SetMaxIdleConns(textServerConns)
	db.SetConnMaxIdleTime(time.Minute)
	if t.db != nil {
		prev := t.db
		time.AfterFunc(time.Minute, func() { prev.Close() })
	}
	t.id, t.ts, t.db = id, rules.NewTextServer(db), db
	return t.ts, nil
}

// closeTexts closes the text server's connections.
func (s *Server) closeTexts() {
	s.texts.mu.Lock()
	defer s.texts.mu.Unlock()
	if s.texts.db != nil {
		s.texts.db.Close()
		s.texts.db, s.texts.ts = nil, nil
	}
}

// refreshSchema re-reads the guarded tables, views, routines, triggers
// and foreign keys after DDL, which may have changed any of them.
func (s *Server) refreshSchema() { s.refreshSchemaLogged(s.log) }

// warnings is log without its info and debug lines. zap refuses to
// raise a logger's level past one it already leaves out (--log-level
// error) and says so on its error output at every call, so such a logger
// is kept as it is.
func warnings(log *zap.Logger) *zap.Logger {
	if !log.Core().Enabled(zap.WarnLevel) {
		return log
	}
	return log.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
}

// refreshSchemaLogged is refreshSchema reporting what it read to log.
func (s *Server) refreshSchemaLogged(log *zap.Logger) {
	cur := s.loaded()
	rs, err := s.compileRulesLogged(cur.cfg, cur.backendTLS, log)
	if err != nil {
		s.log.Warn("re-reading the schema failed; the rules keep the schema read before", zap.Error(err))
		return
	}
	if rs.SchemaUnread() && !cur.rules.SchemaUnread() {
		// A primary that did not answer this once keeps the schema it
		// described last, as between two refreshes; only a schema never
		// read keys nothing.
		return
	}
	s.swapRules(cur.cfg, rs)
}

// refreshSchemaEvery re-reads the schema every backends.schema_refresh
// (as it is at each tick, so a reload changes it) until ctx ends: views,
// routines, triggers and foreign keys made directly on the primary are
// then seen within that time.
func (s *Server) refreshSchemaEvery(ctx context.Context) {
	for {
		every := s.config().Backends.SchemaRefresh.D()
		wait := every
		if wait <= 0 {
			wait = time.Minute // off: look again later in case a reload turns it on
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if every > 0 && readsSchema(s.config()) {
			// Quietly: a rule that does not fit its table still warns.
			s.refreshSchemaLogged(warnings(s.log))
		}
	}
}

// announceSchemaChange tells the other instances sharing the lock service
// that DDL ran here, where the lock service carries such a word
// (lockmgr.SchemaAnnouncer: Redis Pub/Sub, an etcd key, a ZooKeeper
// znode, the MySQL lock table's version row); they re-read the schema at
// once (followSchemaChanges). A word that cannot be given is logged:
// backends.schema_refresh stays the bound for it.
func (s *Server) announceSchemaChange() {
	a, ok := s.locker.(lockmgr.SchemaAnnouncer)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, schemaTimeout)
	defer cancel()
	if err := a.AnnounceSchemaChange(ctx); err != nil {
		s.metrics.schemaNotSent.Inc()
		s.log.Warn("could not tell the other instances about a schema change; they see it at their next schema_refresh", zap.Error(err))
		return
	}
	s.metrics.schemaSent.Inc()
}

// followSchemaChanges re-reads the schema whenever another instance
// sharing the lock service announces DDL, until ctx ends. From the moment
// the word arrives until the read is done, every statement this instance
// plans waits for it (schemaReads): none is planned with the schema from
// before a DDL this instance has heard of.
func (s *Server) followSchemaChanges(ctx context.Context) {
	a, ok := s.locker.(lockmgr.SchemaAnnouncer)
	if !ok {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.SchemaChanges():
		}
		if !readsSchema(s.config()) {
			s.metrics.schemaHeard.Inc()
			continue
		}
		s.schemaReads.begin()
		s.metrics.schemaHeard.Inc() // counted once plans wait for the read
		s.refreshSchemaLogged(warnings(s.log))
		s.schemaReads.end()
	}
}

// schemaReads counts the schema reads after DDL still running, so that
// every session's next plan waits for them (await), not only the plan of
// the session that ran the DDL. Safe for concurrent use.
type schemaReads struct {
	mu      sync.Mutex
	running int
	done    chan struct{} // closed when running drops to 0; nil then
}

func (r *schemaReads) begin() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running == 0 {
		r.done = make(chan struct{})
	}
	r.running++
}

func (r *schemaReads) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running--; r.running == 0 {
		close(r.done)
		r.done = nil
	}
}

// await waits until no schema read after DDL runs (each ends within the
// schema read's timeouts).
func (r *schemaReads) await() {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done != nil {
		<-done
	}
}

// newInstanceID names this process among every proxy sharing a lock backend.
func newInstanceID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}
