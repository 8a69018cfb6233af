package proxy

import (
	"context"
	"crypto/rand"
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
func (s *Server) compileRules(cfg *rules.Config) (*rules.RuleSet, error) {
	if len(cfg.Rules) == 0 {
		return rules.Compile(cfg, rules.Schema{})
	}
	schema, err := s.loadSchema(cfg)
	if err != nil {
		s.log.Warn("cannot read the guarded tables' key columns and the views, routines and triggers from the primary; "+
			"keys normalise by literal form and every CALL is refused until they can be read",
			zap.Error(err))
	}
	return rules.Compile(cfg, schema)
}

func (s *Server) loadSchema(cfg *rules.Config) (rules.Schema, error) {
	if len(cfg.Users) == 0 {
		return rules.Schema{}, nil
	}
	mc := mysql.NewConfig()
	mc.User, mc.Passwd, mc.Net, mc.Addr = cfg.Users[0].User, cfg.Users[0].Password, "tcp", cfg.Backends.Primary
	mc.Timeout = schemaTimeout
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
		s.log.Warn("rule does not fit its table", zap.String("problem", p.String()))
	}
	if objs, ok := schema.Objects(); ok {
		s.log.Info("read the primary's views, routines and triggers",
			zap.Int("views", len(objs.Views)), zap.Int("routines", len(objs.Routines)), zap.Int("triggers", len(objs.Triggers)))
	}
	return schema, err
}

// refreshSchema re-reads the guarded tables, views, routines and triggers
// after DDL (which may have changed any of them).
func (s *Server) refreshSchema() {
	cfg := s.config()
	rs, err := s.compileRules(cfg)
	if err != nil {
		s.log.Warn("recompiling rules after DDL failed", zap.Error(err))
		return
	}
	if s.config() == cfg {
		s.rules.Store(rs)
	}
}

// newInstanceID names this process among every proxy sharing a lock backend.
func newInstanceID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}
