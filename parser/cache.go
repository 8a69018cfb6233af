package parser

import (
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
)

// cacheKey identifies an analysis: the same text means different tables
// under another current database, and other statements under another
// sql_mode or server version.
type cacheKey struct {
	db, sql string
	opts    Options
	shape   bool // sql is a shape (see shapeOf): the entry is its analysis, or noShape
}

// noShape is cached for a shape that cannot stand for its texts.
var noShape = &Analysis{Unparsed: true}

// MaxCachedSQL is the longest text Cache keeps: longer texts (bulk
// inserts, generated IN lists) rarely repeat and would pin their text and
// AST in memory, so they are analysed every time.
const MaxCachedSQL = 64 << 10

// Cache memoises AnalyzeWith by (current database, SQL, Options) in a bounded LRU of at
// most size entries whose estimated memory stays within a byte budget
// (see NewCache), each of at most MaxCachedSQL bytes of text. It is safe
// for concurrent use. The *Analysis it returns is shared with every other
// caller of the same key: callers must not modify it.
type Cache struct {
	lru    *lru.Cache[cacheKey, *Analysis]
	budget int64
	weight atomic.Int64 // estimated bytes held, by Weight
	shaped atomic.Int64 // texts answered by a shape's analysis
}

// DefaultCacheBudget is the memory NewCache lets cached analyses take.
const DefaultCacheBudget = 64 << 20

// NewCache returns a cache that holds at most size analyses (size < 1 is
// taken as 1) and at most DefaultCacheBudget bytes of them as Weight
// estimates them.
func NewCache(size int) *Cache {
	return NewCacheBudget(size, DefaultCacheBudget)
}

// NewCacheBudget is NewCache with a budget of its own (bytes).
func NewCacheBudget(size int, budget int64) *Cache {
	if size < 1 {
		size = 1
	}
	c := &Cache{budget: budget}
	l, err := lru.NewWithEvict[cacheKey, *Analysis](size, func(k cacheKey, a *Analysis) {
		c.weight.Add(-Weight(a))
	})
	if err != nil { // only for size <= 0, excluded above
		panic("parser: " + err.Error())
	}
	c.lru = l
	return c
}

// Weight estimates the memory an Analysis holds, with a margin: its text
// and facts (key tuples grow with the text: ~30 bytes per byte of a bulk
// INSERT) and, for an UPDATE, the parse tree kept for rewriting (~85 bytes
// per byte of text). Measured on the TiDB parser's trees
// (TestWeightCoversMemory); they keep the cache's memory bounded, not
// exact.
func Weight(a *Analysis) int64 {
	n := int64(len(a.SQL))
	w := 512 + 48*n
	for _, f := range a.Stmts {
		if f.Node != nil {
			w += 2560 + 96*int64(len(f.Text))
		}
	}
	return w
}

// Analyze is AnalyzeWith under DefaultOptions.
func (c *Cache) Analyze(sql, currentDB string) (*Analysis, error) {
	return c.AnalyzeWith(sql, currentDB, DefaultOptions)
}

// AnalyzeWith returns the cached analysis of sql under currentDB and o
// (see the function AnalyzeWith), analysing and caching it on a miss. Unparsed analyses are cached too; errors and texts
// longer than MaxCachedSQL are not. Analyses heavier than the whole budget
// are not cached either.
// Two goroutines missing on the same key at once both analyse it; either
// result is correct.
func (c *Cache) AnalyzeWith(sql, currentDB string, o Options) (*Analysis, error) {
	if len(sql) > MaxCachedSQL {
		return AnalyzeWith(sql, currentDB, o)
	}
	k := cacheKey{db: currentDB, sql: sql, opts: o}
	if a, ok := c.lru.Get(k); ok {
		return a, nil
	}
	a, err := AnalyzeWith(sql, currentDB, o)
	if err != nil {
		return nil, err
	}
	c.add(k, a)
	return a, nil
}

// AnalyzeShaped is AnalyzeWith for a text that may share its shape with
// texts seen before (see shapeOf): when it does, the result is the
// cached analysis of the shape and params binds its placeholders to the
// text's literals, as an execute binds a prepared statement's, and the
// TiDB parser does not run. params is nil when an is the analysis of sql
// itself. The first text of a shape is analysed both ways, and the shape
// is used from then on only if the two analyses agree (sameUnderParams).
// An *Analysis of a shape has `?` in its SQL and statement texts: a
// caller that needs the text as sent (to show, rewrite or fence it) uses
// AnalyzeWith.
func (c *Cache) AnalyzeShaped(sql, currentDB string, o Options) (an *Analysis, params []any, err error) {
	if len(sql) > MaxCachedSQL {
		an, err = AnalyzeWith(sql, currentDB, o)
		return an, nil, err
	}
	shape, vals, ok := shapeOf(sql)
	if !ok {
		an, err = c.AnalyzeWith(sql, currentDB, o)
		return an, nil, err
	}
	k := cacheKey{db: currentDB, sql: shape, opts: o, shape: true}
	if sh, ok := c.lru.Get(k); ok {
		if sh == noShape {
			an, err = c.AnalyzeWith(sql, currentDB, o)
			return an, nil, err
		}
		c.shaped.Add(1)
		return sh, bindShape(vals), nil
	}
	lit, err := c.AnalyzeWith(sql, currentDB, o)
	if err != nil {
		return nil, nil, err
	}
	if !usableShape(lit, 0) { // a shape could not stand for it: no second parse
		c.add(k, noShape)
		return lit, nil, nil
	}
	sh, err := AnalyzeWith(shape, currentDB, o)
	if err != nil || !usableShape(sh, len(vals)) || !sameUnderParams(sh, lit, vals) {
		c.add(k, noShape)
		return lit, nil, nil
	}
	c.add(k, sh)
	return sh, bindShape(vals), nil
}

// add caches a under k within the budget. Two goroutines missing on the
// same key at once both analyse it; the second add keeps the first.
func (c *Cache) add(k cacheKey, a *Analysis) {
	w := Weight(a)
	if w > c.budget {
		return
	}
	if had, _ := c.lru.ContainsOrAdd(k, a); had {
		return
	}
	c.weight.Add(w) // an entry evicted by the add was subtracted by the callback
	for c.weight.Load() > c.budget && c.lru.Len() > 1 {
		c.lru.RemoveOldest()
	}
}

// Shaped returns how many texts AnalyzeShaped answered with the analysis
// of a shape seen before (without parsing them).
func (c *Cache) Shaped() int64 { return c.shaped.Load() }

// Len returns the number of cached analyses.
func (c *Cache) Len() int { return c.lru.Len() }

// Bytes returns the estimated memory of the cached analyses (Weight).
func (c *Cache) Bytes() int64 { return c.weight.Load() }
