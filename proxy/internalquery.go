package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Queries lockproxy sends on a session's backend connections for its own
// purposes (never relayed to the client).

var errNoRow = errors.New("proxy: internal query returned no row")

// read reads the next physical packet of an internal exchange.
func (b *backendConn) read() ([]byte, error) {
	_, p, err := b.r.readPhysical()
	if err != nil {
		b.broken = true
		return nil, err
	}
	if len(p) == maxPayload {
		b.broken = true
		return nil, errors.New("proxy: oversized packet in an internal query")
	}
	return p, nil
}

// skipColumns reads n column definitions and, without
// CLIENT_DEPRECATE_EOF, the EOF after them.
func (b *backendConn) skipColumns(n int) error {
	for i := 0; i < n; i++ {
		if _, err := b.read(); err != nil {
			return err
		}
	}
	if b.key.caps&mysql.CLIENT_DEPRECATE_EOF == 0 {
		if _, err := b.read(); err != nil {
			return err
		}
	}
	return nil
}

// queryValue runs a one-result text query and returns the first column of
// its first row (nil for SQL NULL).
func (b *backendConn) queryValue(q string) ([]byte, error) {
	row, err := b.queryRow(q)
	if err != nil || len(row[0]) == 0 {
		return nil, err // an empty value, as SQL NULL, is nil
	}
	return row[0], nil
}

// queryRow runs a one-result text query and returns the columns of its
// first row (nil for SQL NULL).
func (b *backendConn) queryRow(q string) ([][]byte, error) {
	row, _, err := b.queryRowTyped(q, false)
	return row, err
}

// column is what an internal query needs of a column definition.
type column struct {
	typ     byte   // mysql.MYSQL_TYPE_*
	charset uint16 // collation id
}

// queryRowTyped is queryRow that also returns the result's column types
// when typed is set.
func (b *backendConn) queryRowTyped(q string, typed bool) ([][]byte, []column, error) {
	if err := b.writeCommand(append([]byte{mysql.COM_QUERY}, q...)); err != nil {
		return nil, nil, err
	}
	p, err := b.read()
	if err != nil {
		return nil, nil, err
	}
	switch p[0] {
	case mysql.ERR_HEADER:
		return nil, nil, parseErrPayload(p)
	case mysql.OK_HEADER:
		b.status, _ = okStatus(p)
		return nil, nil, errNoRow
	}
	n, _, _, err := readLenEncInt(p, 0)
	if err != nil {
		b.broken = true
		return nil, nil, err
	}
	var cols []column
	if typed {
		for range n {
			p, err := b.read()
			if err != nil {
				return nil, nil, err
			}
			c, err := parseColumn(p, extendedMetadata(b.key.ext))
			if err != nil {
				b.broken = true
				return nil, nil, err
			}
			cols = append(cols, c)
		}
		if err := b.skipColumns(0); err != nil { // the EOF after them
			return nil, nil, err
		}
	} else if err := b.skipColumns(int(n)); err != nil {
		return nil, nil, err
	}
	deprecate := b.key.caps&mysql.CLIENT_DEPRECATE_EOF != 0
	var row [][]byte
	got := false
	for {
		p, err := b.read()
		if err != nil {
			return nil, nil, err
		}
		if p[0] == mysql.ERR_HEADER {
			return nil, nil, parseErrPayload(p)
		}
		if isEOF(p, deprecate) {
			b.status = resultStatus(p, deprecate)
			if b.status&mysql.SERVER_MORE_RESULTS_EXISTS != 0 {
				b.broken = true
				return nil, nil, errors.New("proxy: internal query returned several results")
			}
			if !got {
				return nil, nil, errNoRow
			}
			return row, cols, nil
		}
		if !got {
			pos := 0
			for range n {
				v, next, err := readLenEncString(p, pos)
				if err != nil {
					b.broken = true
					return nil, nil, err
				}
				if v != nil {
					v = append([]byte{}, v...)
				}
				row, pos = append(row, v), next
			}
			got = true
		}
	}
}

// parseColumn reads the collation and type of a column definition
// (Protocol::ColumnDefinition41; extended: with MariaDB's extended type
// information).
func parseColumn(p []byte, extended bool) (column, error) {
	pos, _, _, err := columnFixedAt(p, extended)
	if err != nil || pos+7 > len(p) {
		return column{}, errors.New("proxy: short column definition")
	}
	return column{charset: binary.LittleEndian.Uint16(p[pos:]), typ: p[pos+6]}, nil
}

// prepare prepares q on b and returns the backend's statement id,
// reading the whole answer.
func (b *backendConn) prepare(q string) (uint32, error) {
	id, _, err := b.prepareCounted(q)
	return id, err
}

// prepareCounted is prepare that also returns how many parameters the
// statement takes.
func (b *backendConn) prepareCounted(q string) (id uint32, params int, err error) {
	if err := b.writeCommand(append([]byte{mysql.COM_STMT_PREPARE}, q...)); err != nil {
		return 0, 0, err
	}
	p, err := b.read()
	if err != nil {
		return 0, 0, err
	}
	if p[0] == mysql.ERR_HEADER {
		return 0, 0, parseErrPayload(p)
	}
	if p[0] != mysql.OK_HEADER || len(p) < 12 {
		b.broken = true
		return 0, 0, fmt.Errorf("proxy: malformed prepare response")
	}
	id = binary.LittleEndian.Uint32(p[1:])
	cols, params := int(binary.LittleEndian.Uint16(p[5:])), int(binary.LittleEndian.Uint16(p[7:]))
	if params > 0 {
		if err := b.skipColumns(params); err != nil {
			return 0, 0, err
		}
	}
	if cols > 0 {
		if err := b.skipColumns(cols); err != nil {
			return 0, 0, err
		}
	}
	return id, params, nil
}

// closeStmt closes the backend's statement id on b (COM_STMT_CLOSE has
// no answer; a failed write shows at the next command).
func (b *backendConn) closeStmt(id uint32) {
	_ = b.writeCommand(binary.LittleEndian.AppendUint32([]byte{mysql.COM_STMT_CLOSE}, id))
}

// withParamTypes returns an execute packet that binds types explicitly
// (new_params_bound_flag = 1), for a backend statement that has never been
// told them: clients re-execute with the flag 0, reusing types that only
// the connection they first executed on knows.
func withParamTypes(p []byte, n int, types []byte) ([]byte, error) {
	pos := 10 + (n+7)/8
	if n == 0 || pos >= len(p) {
		return p, nil
	}
	if p[pos] == 1 {
		return p, nil
	}
	if len(types) < 2*n {
		return nil, errBadParams
	}
	out := make([]byte, 0, len(p)+2*n)
	out = append(out, p[:pos]...)
	out = append(out, 1)
	out = append(out, types[:2*n]...)
	return append(out, p[pos+1:]...), nil
}
