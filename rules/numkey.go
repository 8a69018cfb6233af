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
// the rows selected are those equal to that decimal. Stored into a
// DECIMAL column, the string is rounded from its own digits to the
// column's scale. lockproxy asks the primary for either conversion,
// CAST(value AS DECIMAL(65,38)) compared and CAST(value AS
// DECIMAL(65,scale)) stored, caches the answer per (scale, value), and
// keys the decimal it gives as any other, range checks included.
//
// Where even that cannot be sure, the statement is refused: such a string
// stored into an integer column (MariaDB's rounding there is not CAST's);
// an answer with more integer digits than the conversion holds (clipped);
// a string beyond 2^53 compared with an integer column; a decimal literal
// past 38 fraction digits; a float beyond 2^53 on an integer column
// (several integers share its double).

// numberCacheSize bounds the cache of the primary's conversions.
const numberCacheSize = 16384

// numberServer converts numeric strings on the primary, with a cache.
type numberServer struct {
	cache *lru.Cache[numberQuestion, numberAnswer]
}

// numberQuestion is a string converted to DECIMAL(65,scale).
type numberQuestion struct {
	scale int
	value string
}

type numberAnswer struct {
	canon   string // the canonical decimal; "" when failure is set
	failure string
}

func newNumberServer() *numberServer {
	c, _ := lru.New[numberQuestion, numberAnswer](numberCacheSize)
	return &numberServer{cache: c}
}

// serverDecimal is the canonical decimal MariaDB converts the string
// value v to when comparing it with the numeric column col (use Compare:
// 38 fraction digits) or storing it there (Assign: the column's scale).
func serverDecimal(col *Column, v parser.Value, use Use) (string, error) {
	if col.srv == nil || col.srv.s == nil {
		return "", unkeyable("%s has more digits than lockproxy reads in process (%d, %d after the point), and lockproxy has no connection to ask the primary how it converts it", v.Text, maxDecimalDigits, maxDecimalScale)
	}
	if !asciiOnly(v.Str) {
		return "", unkeyable("%s meets numeric column %s and is not a number in printable ASCII", v.Text, col.Name)
	}
	q := numberQuestion{scale: maxDecimalScale, value: v.Str}
	if use == Assign {
		if family(col.DataType) != famDecimal {
			// An integer column rounds such a string otherwise than CAST
			// does ('0.' + 40 nines is stored as 0, CAST to DECIMAL(65,0)
			// gives 1): nothing the primary answers says which row.
			return "", unkeyable("%s stored into integer column %s has more digits than lockproxy reads as MariaDB stores them (%d, %d after the point)", v.Text, col.Name, maxDecimalDigits, maxDecimalScale)
		}
		q.scale = decimalScale(col.ColumnType)
	}
	ts := col.srv.s
	if a, ok := ts.numbers.cache.Get(q); ok {
		return a.result(col, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ts.timeout)
	defer cancel()
	a, err := askDecimal(ctx, ts.db, q)
	if err != nil {
		return "", unkeyable("column %s: cannot ask the primary how it converts %s: %v", col.Name, v.Text, err)
	}
	ts.numbers.cache.Add(q, a)
	return a.result(col, v)
}

func (a numberAnswer) result(col *Column, v parser.Value) (string, error) {
	if a.failure != "" {
		return "", unkeyable("column %s: the primary converts %s so that lockproxy cannot key it: %s", col.Name, v.Text, a.failure)
	}
	return a.canon, nil
}

// askDecimal asks db for CAST(q.value AS DECIMAL(65,q.scale)). An error
// is a failure to reach the server; what the server answered is in the
// answer.
func askDecimal(ctx context.Context, db *sql.DB, q numberQuestion) (numberAnswer, error) {
	var got sql.NullString
	query := fmt.Sprintf("SELECT CAST(CAST(_binary X'%s' AS DECIMAL(65,%d)) AS CHAR)", hex.EncodeToString([]byte(q.value)), q.scale)
	err := db.QueryRowContext(ctx, query).Scan(&got)
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
	if ip, _, _ := strings.Cut(strings.TrimPrefix(c, "-"), "."); len(ip) >= maxDecimalDigits-q.scale {
		// DECIMAL(65,scale) holds 65-scale integer digits: a value that
		// long may have been clipped.
		return numberAnswer{failure: "it has more integer digits than the conversion holds"}, nil
	}
	return numberAnswer{canon: c}, nil
}
