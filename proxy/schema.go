package proxy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"
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
// that writes through them meet the rules. When the primary cannot be asked, rules still compile
// (values then normalise by their literal form) and a warning says so.
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
			"keys normalise by literal form and every CALL is refused until they can be read",
			zap.Error(err))
	}
	return rules.Compile(cfg, schema)
}

// readsSchema reports whether cfg needs the primary's schema: rules key
// guarded tables with it, and replica routing needs the views (a read of
// a view that calls a stored function stays on the primary).
func readsSchema(cfg *rules.Config) bool { return len(cfg.Rules) > 0 || len(cfg.Backends.Replicas) > 0 }

func (s *Server) loadSchema(cfg *rules.Config, btls *tls.Config, log *zap.Logger) (rules.Schema, error) {
	if len(cfg.Users) == 0 {
		return rules.Schema{}, nil
	}
	mc := mysql.NewConfig()
	mc.User, mc.Passwd, mc.Net, mc.Addr = cfg.Users[0].User, cfg.Users[0].Password, "tcp", cfg.Backends.Primary
	mc.Timeout = schemaTimeout
	mc.TLS = rules.ForAddr(btls, cfg.Backends.Primary)
	connector, err := mysql.NewConnector(mc)
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
	if objs, ok := schema.Objects(); ok {
		log.Info("read the primary's views, routines, triggers and foreign keys",
			zap.Int("views", len(objs.Views)), zap.Int("routines", len(objs.Routines)), zap.Int("triggers", len(objs.Triggers)))
	}
	return schema, err
}

// refreshSchema re-reads the guarded tables, views, routines, triggers
// and foreign keys after DDL, which may have changed any of them.
func (s *Server) refreshSchema() { s.refreshSchemaLogged(s.log) }

// refreshSchemaLogged is refreshSchema reporting what it read to log.
func (s *Server) refreshSchemaLogged(log *zap.Logger) {
	cur := s.loaded()
	rs, err := s.compileRulesLogged(cur.cfg, cur.backendTLS, log)
	if err != nil {
		s.log.Warn("re-reading the schema failed; the rules keep the schema read before", zap.Error(err))
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
			s.refreshSchemaLogged(s.log.WithOptions(zap.IncreaseLevel(zap.WarnLevel)))
		}
	}
}

// newInstanceID names this process among every proxy sharing a lock backend.
func newInstanceID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}
