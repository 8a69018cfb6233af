package parser

import (
	lru "github.com/hashicorp/golang-lru/v2"
)

// cacheKey identifies an analysis: the same text means different tables
// under another current database.
type cacheKey struct {
	db, sql string
}

// MaxCachedSQL is the longest text Cache keeps: longer texts (bulk
// inserts, generated IN lists) rarely repeat and would pin their text and
// AST in memory, so they are analysed every time.
const MaxCachedSQL = 64 << 10

// Cache memoises Analyze by (current database, SQL) in a bounded LRU of at
// most size entries, each of at most MaxCachedSQL bytes of text. It is
// safe for concurrent use. The *Analysis it returns is shared with every
// other caller of the same key: callers must not modify it.
type Cache struct {
	lru *lru.Cache[cacheKey, *Analysis]
}

// NewCache returns a cache that holds at most size analyses (size < 1 is
// taken as 1).
func NewCache(size int) *Cache {
	if size < 1 {
		size = 1
	}
	c, err := lru.New[cacheKey, *Analysis](size)
	if err != nil { // only for size <= 0, excluded above
		panic("parser: " + err.Error())
	}
	return &Cache{lru: c}
}

// Analyze returns the cached analysis of sql under currentDB, analysing and
// caching it on a miss. Unparsed analyses are cached too; errors and texts
// longer than MaxCachedSQL are not.
// Two goroutines missing on the same key at once both analyse it; either
// result is correct.
func (c *Cache) Analyze(sql, currentDB string) (*Analysis, error) {
	if len(sql) > MaxCachedSQL {
		return Analyze(sql, currentDB)
	}
	k := cacheKey{db: currentDB, sql: sql}
	if a, ok := c.lru.Get(k); ok {
		return a, nil
	}
	a, err := Analyze(sql, currentDB)
	if err != nil {
		return nil, err
	}
	c.lru.Add(k, a)
	return a, nil
}

// Len returns the number of cached analyses.
func (c *Cache) Len() int { return c.lru.Len() }
