package rules

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Column is one column of a guarded table as information_schema.COLUMNS
// describes it on the primary. Names are lowercased.
type Column struct {
	Name       string
	DataType   string // int, varchar, decimal ... (DATA_TYPE)
	ColumnType string // int(10) unsigned, binary(16) ... (COLUMN_TYPE)
	Collation  string // utf8mb4_general_ci ...; "" for non-text columns
	Unsigned   bool
	// AutoIncrement is true for an AUTO_INCREMENT column: an INSERT that
	// leaves it out (or gives NULL or 0) makes a new row nobody can name yet.
	AutoIncrement bool
	// text is what the primary proved of a text column's collation (see
	// textkey.go); nil for a schema not read from a server, whose text
	// values are then folded by their literal form.
	text    *textCollation
	charset string         // CHARACTER_SET_NAME, as read with text
	srv     *textServerRef // the primary to ask, for a schema read from one
}

// TableInfo describes a guarded table: its columns (by lowercased name) and
// its unique keys (PRIMARY first), each a list of lowercased column names.
type TableInfo struct {
	Schema, Name string
	Columns      map[string]Column
	UniqueKeys   [][]string
	// Order lists the columns an INSERT without a column list gives values
	// for, lowercased, in the table's order (ORDINAL_POSITION, INVISIBLE
	// columns left out); nil when the table was not read from a server.
	Order []string
}

// Schema holds the TableInfo of the guarded tables, by lowercased
// "schema.table". The zero Schema knows no table (values are then
// normalised without type information). Immutable once built; safe for
// concurrent use.
type Schema struct {
	tables map[string]*TableInfo
	// objects are the primary's views, routines and triggers; nil when
	// never read (see WithObjects).
	objects *Objects
	// texts is where the text key columns' collations ask the primary;
	// nil for a schema not read from a server.
	texts *textServerRef
	// textNotes say which collations have no fast path, and why.
	textNotes []string
	// unread says why the primary could not be asked for the schema (see
	// UnreadSchema); "" otherwise.
	unread string
}

// UnreadSchema is the Schema of a primary that could not be read, err
// saying why. Its guarded tables' key types and collations are unknown, so
// no key value can be normalised as MariaDB compares it (an INT key meets
// 'abc' as 0, a string key meets 1001 as '1001.0' and ' 1001' too): every
// statement on a guarded table is unkeyed, and its rule's on_unkeyed
// decides, until the schema is read again.
func UnreadSchema(err error) Schema {
	return Schema{unread: err.Error()}
}

// Unread reports whether s is an UnreadSchema.
func (s Schema) Unread() bool { return s.unread != "" }

// NewSchema builds a Schema from table descriptions (tests, `lockproxy
// explain` without a database).
func NewSchema(tables ...*TableInfo) Schema {
	s := Schema{tables: map[string]*TableInfo{}}
	for _, t := range tables {
		s.tables[strings.ToLower(t.Schema+"."+t.Name)] = t
	}
	return s
}

// Table returns the description of schema.name, or nil when unknown.
func (s Schema) Table(schema, name string) *TableInfo {
	return s.tables[strings.ToLower(schema+"."+name)]
}

// Tables lists the described tables, sorted by schema and name.
func (s Schema) Tables() []*TableInfo {
	out := make([]*TableInfo, 0, len(s.tables))
	for _, t := range s.tables {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Schema+"."+out[i].Name < out[j].Schema+"."+out[j].Name
	})
	return out
}

// Column returns the named column (nil when t is nil or has no such column).
func (t *TableInfo) Column(name string) *Column {
	if t == nil {
		return nil
	}
	c, ok := t.Columns[strings.ToLower(name)]
	if !ok {
		return nil
	}
	return &c
}

// IsUniqueKey reports whether cols (any order, any case) are exactly the
// columns of one of t's unique keys.
func (t *TableInfo) IsUniqueKey(cols []string) bool {
	for _, uk := range t.UniqueKeys {
		if sameColumns(uk, cols) {
			return true
		}
	}
	return false
}

// schemaQueryTimeout bounds LoadSchema when ctx has no deadline.
const schemaQueryTimeout = 10 * time.Second

// LoadSchema reads, from information_schema on the primary db, the columns
// and unique keys of every table the rules of cfg guard (for a rule without
// a database, the table of that name in every database), and every view,
// stored routine and trigger the backend user may see. It returns the
// Schema together with the problems found: a guarded table that does not
// exist, a key column it lacks, a rule key that is not one of its unique
// keys. A query failure is returned as the error.
func LoadSchema(ctx context.Context, db *sql.DB, cfg *Config) (Schema, []Problem, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, schemaQueryTimeout)
		defer cancel()
	}
	objs, err := loadObjects(ctx, db)
	if err != nil {
		return Schema{}, nil, err
	}
	s := NewSchema().WithObjects(objs)
	var ps []Problem
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		rdb, table, ok := SplitTable(r.Table)
		if !ok {
			continue
		}
		found, err := loadTables(ctx, db, rdb, table)
		if err != nil {
			return Schema{}, nil, err
		}
		path := fmt.Sprintf("rules[%d]", i)
		if len(found) == 0 {
			ps = append(ps, Problem{File: cfg.Path, Line: cfg.Line(path + ".table"), Path: path + ".table",
				Msg: fmt.Sprintf("table %s does not exist on the primary", r.Table)})
			continue
		}
		for _, t := range found {
			s.tables[strings.ToLower(t.Schema+"."+t.Name)] = t
			ps = append(ps, checkKey(cfg.Path, cfg.Line(path+".key"), path, r, t)...)
		}
	}
	s.textNotes = loadCollations(ctx, db, &s)
	return s, ps, nil
}

// TextNotes says, a line per collation of a text key column, where the
// primary did not prove printable ASCII keys (so every value is asked of
// it) or cannot weigh values at all (so they are refused).
func (s Schema) TextNotes() []string { return s.textNotes }

// WithTextServer returns s with its text key columns asking ts for the
// keys of values the fast path does not cover (see TextServer). Without
// it such values are refused. Call it before the schema is used.
func (s Schema) WithTextServer(ts *TextServer) Schema {
	if s.texts != nil {
		s.texts.s = ts
	}
	return s
}

func checkKey(file string, line int, path string, r *Rule, t *TableInfo) []Problem {
	var ps []Problem
	missing := false
	for _, k := range r.Key {
		if t.Column(k) == nil {
			missing = true
			ps = append(ps, Problem{File: file, Line: line, Path: path + ".key",
				Msg: fmt.Sprintf("table %s.%s has no column %s", t.Schema, t.Name, k)})
		}
	}
	if !missing && !t.IsUniqueKey(r.Key) {
		ps = append(ps, Problem{File: file, Line: line, Path: path + ".key",
			Msg: fmt.Sprintf("[%s] is not a primary or unique key of %s.%s", strings.Join(r.Key, ", "), t.Schema, t.Name)})
	}
	return ps
}

const columnsQuery = `SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE,
 IFNULL(COLLATION_NAME, ''), EXTRA, IFNULL(CHARACTER_SET_NAME, '')
FROM information_schema.COLUMNS
WHERE LOWER(TABLE_NAME) = ? AND (? = '' OR LOWER(TABLE_SCHEMA) = ?)
 AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')
ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION`

const keysQuery = `SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, COLUMN_NAME
FROM information_schema.STATISTICS
WHERE NON_UNIQUE = 0 AND LOWER(TABLE_NAME) = ? AND (? = '' OR LOWER(TABLE_SCHEMA) = ?)
ORDER BY TABLE_SCHEMA, TABLE_NAME, INDEX_NAME = 'PRIMARY' DESC, INDEX_NAME, SEQ_IN_INDEX`

// loadTables describes the tables named table in database db (any
// database when db is "").
func loadTables(ctx context.Context, db *sql.DB, schema, table string) ([]*TableInfo, error) {
	byName := map[string]*TableInfo{}
	var order []*TableInfo
	rows, err := db.QueryContext(ctx, columnsQuery, table, schema, schema)
	if err != nil {
		return nil, fmt.Errorf("rules: read columns of %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var sch, name, col, dt, ct, coll, extra, cs string
		if err := rows.Scan(&sch, &name, &col, &dt, &ct, &coll, &extra, &cs); err != nil {
			return nil, fmt.Errorf("rules: read columns of %s: %w", table, err)
		}
		key := strings.ToLower(sch + "." + name)
		t := byName[key]
		if t == nil {
			t = &TableInfo{Schema: strings.ToLower(sch), Name: strings.ToLower(name), Columns: map[string]Column{}}
			byName[key] = t
			order = append(order, t)
		}
		lc := strings.ToLower(col)
		if !strings.Contains(strings.ToUpper(extra), "INVISIBLE") {
			t.Order = append(t.Order, lc)
		}
		t.Columns[lc] = Column{Name: lc, DataType: strings.ToLower(dt), ColumnType: strings.ToLower(ct),
			Collation: strings.ToLower(coll), Unsigned: strings.Contains(strings.ToLower(ct), "unsigned"),
			AutoIncrement: strings.Contains(strings.ToLower(extra), "auto_increment"), charset: strings.ToLower(cs)}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rules: read columns of %s: %w", table, err)
	}
	if err := loadKeys(ctx, db, schema, table, byName); err != nil {
		return nil, err
	}
	return order, nil
}

func loadKeys(ctx context.Context, db *sql.DB, schema, table string, byName map[string]*TableInfo) error {
	rows, err := db.QueryContext(ctx, keysQuery, table, schema, schema)
	if err != nil {
		return fmt.Errorf("rules: read keys of %s: %w", table, err)
	}
	defer rows.Close()
	last := ""
	for rows.Next() {
		var sch, name, index, col string
		if err := rows.Scan(&sch, &name, &index, &col); err != nil {
			return fmt.Errorf("rules: read keys of %s: %w", table, err)
		}
		t := byName[strings.ToLower(sch+"."+name)]
		if t == nil {
			continue
		}
		id := strings.ToLower(sch + "." + name + "." + index)
		if id != last {
			t.UniqueKeys = append(t.UniqueKeys, nil)
			last = id
		}
		k := &t.UniqueKeys[len(t.UniqueKeys)-1]
		*k = append(*k, strings.ToLower(col))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("rules: read keys of %s: %w", table, err)
	}
	return nil
}
