package rules

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/lockproxy/lockproxy/parser"
)

// Numbers past the digits lockproxy reads in process. A string compared
// with an integer or DECIMAL column is converted by MariaDB to a decimal
// of at most 38 fraction digits, rounding what is beyond them ('1001.'
// followed by 39 zeros and a 1 selects row 1001, '1001e-400' row 0), and
// the rows selected are those equal to that decimal. lockproxy asks the
// primary for that conversion, CAST(value AS DECIMAL(65,38)), caches the
// answer per value, and keys the decimal it gives as any other.
//
// Where even that cannot be sure, the statement is refused: a value
// stored (INSERT, REPLACE, upsert, SET) rather than compared, which
// MariaDB rounds to the column's scale from the text (not from the
// 38-digit decimal); an answer with more integer digits than
// DECIMAL(65,38) holds (clipped); a string beyond 2^53 on an integer
// column; a decimal literal past 38 fraction digits; a float beyond 2^53
// on an integer column (several integers share its double).

// numberCacheSize bounds the cache of the primary's conversions.
const numberCacheSize = 16384

// numberServer converts numeric strings on the primary, with a cache.
type numberServer struct {
	cache *lru.Cache[string, numberAnswer]
}

type numberAnswer struct {
	canon   string // the canonical decimal; "" when failure is set
	failure string
}

func newNumberServer() *numberServer {
	c, _ := lru.New[string, numberAnswer](numberCacheSize)
	return &numberServer{cache: c}
}

// serverDecimal is the canonical decimal MariaDB converts the string
// value v to when comparing it with a numeric column col.
func serverDecimal(col *Column, v parser.Value) (string, error) {
	if col.text == nil || col.text.srv == nil || col.text.srv.s == nil {
		return "", unkeyable("%s has more digits than lockproxy reads in process (%d, %d after the point), and lockproxy has no connection to ask the primary how it converts it", v.Text, maxDecimalDigits, maxDecimalScale)
	}
	if !asciiOnly(v.Str) {
		return "", unkeyable("%s compared with numeric column %s is not a number in printable ASCII", v.Text, col.Name)
	}
	ts := col.text.srv.s
	if a, ok := ts.numbers.cache.Get(v.Str); ok {
		return a.result(col, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ts.timeout)
	defer cancel()
	a, err := askDecimal(ctx, ts.db, v.Str)
	if err != nil {
		return "", unkeyable("column %s: cannot ask the primary how it converts %s: %v", col.Name, v.Text, err)
	}
	ts.numbers.cache.Add(v.Str, a)
	return a.result(col, v)
}

func (a numberAnswer) result(col *Column, v parser.Value) (string, error) {
	if a.failure != "" {
		return "", unkeyable("column %s: the primary converts %s so that lockproxy cannot key it: %s", col.Name, v.Text, a.failure)
	}
	return a.canon, nil
}

// askDecimal asks db for CAST(s AS DECIMAL(65,38)). An error is a failure
// to reach the server; what the server answered is in the answer.
func askDecimal(ctx context.Context, db *sql.DB, s string) (numberAnswer, error) {
	var got sql.NullString
	err := db.QueryRowContext(ctx, "SELECT CAST(CAST(_binary X'"+hex.EncodeToString([]byte(s))+"' AS DECIMAL(65,38)) AS CHAR)").Scan(&got)
	switch {
	case err != nil && isServerError(err):
		return numberAnswer{failure: err.Error()}, nil
	case err != nil:
		return numberAnswer{}, err
	case !got.Valid:
		return numberAnswer{failure: "it converts to NULL"}, nil
	}
	c, ok := canonDecimal(got.String)
	if !ok {
		return numberAnswer{failure: fmt.Sprintf("the answer %q is not a decimal", got.String)}, nil
	}
	if ip, _, _ := strings.Cut(strings.TrimPrefix(c, "-"), "."); len(ip) >= maxDecimalDigits-maxDecimalScale {
		// DECIMAL(65,38) holds 27 integer digits: a longer value was clipped.
		return numberAnswer{failure: "it has more integer digits than the conversion holds"}, nil
	}
	return numberAnswer{canon: c}, nil
}
