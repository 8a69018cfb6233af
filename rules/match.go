package rules

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lockproxy/lockproxy/parser"
)

// ErrNoConfig is returned by Compile for a nil configuration.
var ErrNoConfig = errors.New("rules: no configuration")

// RuleSet is a Config's rules compiled for matching, with the Schema of
// the guarded tables. Build it once per configuration load; it is
// immutable and safe for concurrent use.
type RuleSet struct {
	cfg     *Config
	schema  Schema
	byTable map[string][]*compiledRule // lowercased table name → rules
	all     []*compiledRule            // in rules.yaml order
	// objects are the schema's views, routines and triggers resolved
	// against the rules; nil when the schema does not know them.
	objects *objectPlan
	// rewrites: some rule has a rewrite; rejectsUnpaired: some rule says
	// rewrite.on_unpaired: reject.
	rewrites, rejectsUnpaired bool
	// observes: some rule is in observe mode.
	observes bool
}

// HasRewrites reports whether some rule has a rewrite plan.
func (rs *RuleSet) HasRewrites() bool { return rs != nil && rs.rewrites }

// Observes reports whether some rule is in observe mode (Rule.Observes):
// only then does a statement's plan look at the rules' modes.
func (rs *RuleSet) Observes() bool { return rs != nil && rs.observes }

type compiledRule struct {
	rule  *Rule
	db    string   // "" for any database
	table string   // lowercased
	key   []string // lowercased key columns, in rule order
	// unpinned is why a condition that names rows does not key them:
	// noKeysReason's one reason that depends on the rule, made once.
	unpinned string
}

// SchemaUnread reports whether rs was compiled over an UnreadSchema.
func (rs *RuleSet) SchemaUnread() bool { return rs.schema.Unread() }

// Compile indexes cfg's rules by table. schema may be the zero Schema (then
// values are normalised without column types; see Normalize).
func Compile(cfg *Config, schema Schema) (*RuleSet, error) {
	if cfg == nil {
		return nil, ErrNoConfig
	}
	rs := &RuleSet{cfg: cfg, schema: schema, byTable: map[string][]*compiledRule{}}
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		db, table, ok := SplitTable(r.Table)
		if !ok {
			return nil, fmt.Errorf("%w: rules[%d].table %q", ErrInvalidConfig, i, r.Table)
		}
		key := make([]string, len(r.Key))
		for j, k := range r.Key {
			key[j] = strings.ToLower(strings.TrimSpace(k))
		}
		cr := &compiledRule{rule: r, db: db, table: table, key: key,
			unpinned: fmt.Sprintf("the condition does not pin every key column %v to constants", key)}
		rs.byTable[table] = append(rs.byTable[table], cr)
		rs.all = append(rs.all, cr)
		rs.rewrites = rs.rewrites || r.Rewrite != nil
		rs.rejectsUnpaired = rs.rejectsUnpaired || rejectsUnpaired(r)
		rs.observes = rs.observes || r.Observes()
	}
	if objs, ok := schema.Objects(); ok {
		rs.compileObjects(objs)
	}
	return rs, nil
}

// Config returns the configuration the set was compiled from.
func (rs *RuleSet) Config() *Config { return rs.cfg }

// Schema returns the table descriptions the set normalises with.
func (rs *RuleSet) Schema() Schema { return rs.schema }

// Match decides what the rules say about one statement. currentDB is the
// session's database, used for tables the facts leave unqualified; inTxn
// says whether the session is in an explicit transaction or has
// autocommit off (a plain SELECT then takes read_in_txn locks). Keys from
// `?` placeholders are left for Bind. Match only reads; call it for every
// execution of a prepared statement, since inTxn may differ.
//
// When the Schema knows the primary's views, routines and triggers
// (Schema.WithObjects), a table occurrence naming a view that reads a
// guarded table is matched as that table: keyed through the view's column
// map when the view is a plain projection of it, unkeyed otherwise. A
// statement that calls a stored procedure or function, or writes a table
// with a trigger, whose body may write a guarded table gets Hidden writes
// (and Reject) unless the rule allows the routine or trigger.
func (rs *RuleSet) Match(f *parser.Facts, currentDB string, inTxn bool) Decision {
	return rs.MatchIn(f, currentDB, inTxn, TextCharsets{})
}

// MatchIn is Match for a session whose text values arrive in the
// character sets cs (the server's character_set_client and
// character_set_connection): text keys are the values as the server
// converts and weighs them (see NormalizeIn).
func (rs *RuleSet) MatchIn(f *parser.Facts, currentDB string, inTxn bool, cs TextCharsets) Decision {
	var d Decision
	if rs == nil || f == nil {
		return d
	}
	b := builder{cs: cs}
	if matchable(f.Kind) {
		for _, ref := range f.Tables {
			schema := refSchema(ref, currentDB)
			if v := rs.view(schema, ref.Name); v != nil {
				rs.matchView(&b, &d, f, ref, v, inTxn)
				continue
			}
			rs.matchTable(&b, &d, f, ref, schema, inTxn)
		}
	}
	rs.matchHidden(&b, &d, f, currentDB)
	return b.finish(d)
}

// matchTable matches one occurrence of a base table. The keys of a rule
// that rewrites or fences the one table of a SELECT or UPDATE are noted
// for Decision.RewriteTarget and FenceTarget too, derived once with its
// lock keys; such a rule is keyed even when it takes no lock for the
// statement (a rule may rewrite without locking).
func (rs *RuleSet) matchTable(b *builder, d *Decision, f *parser.Facts, ref parser.TableRef, schema string, inTxn bool) {
	targets := len(f.Tables) == 1 && (f.Kind == parser.KindSelect || f.Kind == parser.KindUpdate)
	for _, cr := range rs.rulesFor(schema, ref.Name) {
		class := classOf(f, ref, inTxn)
		b.hit(d, cr.rule)
		locks := class != ClassNone && cr.rule.Locks(class)
		target := targets && (cr.rule.Rewrite != nil || cr.rule.Fence != "")
		if target {
			d.targets = append(d.targets, cr.rule)
		}
		if !locks && !target {
			continue
		}
		if locks {
			d.raise(class)
			if class == ClassWrite && ref.Write && cr.rule.Rewrite != nil && d.Rewrite == nil {
				d.Rewrite, d.RewriteRule = cr.rule.Rewrite, cr.rule
			}
		}
		b.read = locks && class == ClassReadInTxn
		b.target, b.only = target, !locks
		rs.keysFor(b, f, ref, schema, cr)
		b.read, b.target, b.only = false, false, false
	}
}

// MatchUnparsed decides for text the parser rejected: every rule guarding
// a table the lexical scan found (or a table a view it found reads)
// applies, and since no keys can be derived each one that locks anything
// is unkeyed (its on_unkeyed decides). Routines the text names and
// triggers on the tables it names count as in Match.
func (rs *RuleSet) MatchUnparsed(a *parser.Analysis, currentDB string) Decision {
	var d Decision
	if rs == nil || a == nil {
		return d
	}
	var b builder
	const why = "the statement could not be parsed"
	for _, ref := range a.LexTables {
		schema := refSchema(ref, currentDB)
		if v := rs.view(schema, ref.Name); v != nil {
			for _, g := range v.guards {
				b.hit(&d, g.cr.rule)
				if len(g.cr.rule.Lock) > 0 {
					d.Class = ClassWrite
					b.unkeyed(g.cr.rule, "", g.table, why+"; through view "+v.name)
				}
			}
			continue
		}
		for _, cr := range rs.rulesFor(schema, ref.Name) {
			b.hit(&d, cr.rule)
			if len(cr.rule.Lock) > 0 {
				d.Class = ClassWrite
				b.unkeyed(cr.rule, schema, ref.Name, why)
			}
		}
	}
	rs.matchHiddenLex(&b, &d, a, currentDB)
	return b.finish(d)
}

// rulesFor returns the rules guarding schema.table.
func (rs *RuleSet) rulesFor(schema, table string) []*compiledRule {
	cands := rs.byTable[strings.ToLower(table)]
	if len(cands) == 0 {
		return nil
	}
	out := cands[:0:0]
	for _, cr := range cands {
		if cr.db == "" || cr.db == strings.ToLower(schema) {
			out = append(out, cr)
		}
	}
	return out
}

// matchable reports whether statements of kind k are subject to rules.
func matchable(k parser.Kind) bool {
	switch k {
	case parser.KindSelect, parser.KindInsert, parser.KindReplace, parser.KindUpdate,
		parser.KindDelete, parser.KindLoadData:
		return true
	}
	return false
}

// classOf says why a statement touching ref would lock it. Tables a write
// statement only reads (INSERT ... SELECT, UPDATE ... JOIN) count as
// locking reads: InnoDB share-locks the rows it reads there.
func classOf(f *parser.Facts, ref parser.TableRef, inTxn bool) LockClass {
	switch f.Kind {
	case parser.KindSelect:
		switch {
		case f.Lock.Mode != parser.LockNone:
			return ClassLockingRead
		case inTxn:
			return ClassReadInTxn
		}
		return ClassNone
	default:
		if ref.Write {
			return ClassWrite
		}
		return ClassLockingRead
	}
}
