package proxy

import (
	"encoding/binary"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// resultForm is how writeResult answers: a text result set (COM_QUERY),
// the prepare response of a statement lockproxy answers itself
// (COM_STMT_PREPARE of SHOW LOCKPROXY ...), or a binary result set
// (COM_STMT_EXECUTE of it).
type resultForm struct {
	prepare *stmt // answer COM_STMT_PREPARE for this statement
	binary  bool  // rows in the binary protocol
}

// writeResult answers the current command with a result set that lockproxy
// makes itself (all columns VARCHAR, NULL for nil), in the form s.ex.form
// says.
func (s *session) writeResult(columns []string, rows [][]*string) error {
	w := localResult{cw: s.cw, caps: s.client.caps, ext: s.client.ext, status: s.ex.statusOut(s.status)}
	st := s.ex.form.prepare
	if st == nil {
		return w.resultSet(columns, rows, s.ex.form.binary)
	}
	// COM_STMT_PREPARE of a statement lockproxy answers itself (no
	// parameters): it is kept for COM_STMT_EXECUTE.
	if err := w.prepareOK(st, columns); err != nil {
		return err
	}
	s.prep.add(st)
	s.ex.lastOK = true
	return s.cw.flush()
}

// localResult writes what lockproxy answers itself to the client's
// writer cw, for a client of capabilities caps and ext, ending with the
// server status status.
type localResult struct {
	cw        *packetWriter
	caps, ext uint32
	status    uint16
}

// resultSet writes a result set, in the binary protocol when binary, and
// flushes.
func (w localResult) resultSet(columns []string, rows [][]*string, binary bool) error {
	seq := byte(1)
	var err error
	if seq, err = w.cw.writePacket(seq, appendLenEncInt(nil, uint64(len(columns)))); err != nil {
		return err
	}
	if seq, err = w.columns(seq, columns); err != nil {
		return err
	}
	for _, r := range rows {
		b := textRow(r)
		if binary {
			b = binaryRow(r)
		}
		if seq, err = w.cw.writePacket(seq, b); err != nil {
			return err
		}
	}
	end := eofPayload(w.status, 0)
	if w.caps&mysql.CLIENT_DEPRECATE_EOF != 0 {
		end = okPayload(0, 0, w.status, 0)
		end[0] = mysql.EOF_HEADER
	}
	if _, err = w.cw.writePacket(seq, end); err != nil {
		return err
	}
	return w.cw.flush()
}

// columns writes column definitions and, unless CLIENT_DEPRECATE_EOF or
// there are none, the EOF after them.
func (w localResult) columns(seq byte, columns []string) (byte, error) {
	var err error
	for _, c := range columns {
		if seq, err = w.cw.writePacket(seq, columnDef(c, extendedMetadata(w.ext))); err != nil {
			return seq, err
		}
	}
	if len(columns) > 0 && w.caps&mysql.CLIENT_DEPRECATE_EOF == 0 {
		if seq, err = w.cw.writePacket(seq, eofPayload(w.status, 0)); err != nil {
			return seq, err
		}
	}
	return seq, nil
}

// prepareOK writes the answer to COM_STMT_PREPARE of st, a statement
// lockproxy answers itself (no parameters), unflushed.
func (w localResult) prepareOK(st *stmt, columns []string) error {
	st.numColumns = len(columns)
	b := []byte{mysql.OK_HEADER}
	b = binary.LittleEndian.AppendUint32(b, st.id)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(columns)))
	b = binary.LittleEndian.AppendUint16(b, 0) // parameters
	b = append(b, 0, 0, 0)                     // filler, warnings
	seq, err := w.cw.writePacket(1, b)
	if err != nil {
		return err
	}
	_, err = w.columns(seq, columns)
	return err
}

func textRow(r []*string) []byte {
	var b []byte
	for _, v := range r {
		if v == nil {
			b = append(b, 0xfb)
		} else {
			b = appendLenEncString(b, *v)
		}
	}
	return b
}

// binaryRow encodes a row of VARCHAR columns in the binary protocol: a
// header, the NULL bitmap (offset 2), then each non-NULL value.
func binaryRow(r []*string) []byte {
	nulls := make([]byte, (len(r)+7+2)/8)
	for i, v := range r {
		if v == nil {
			nulls[(i+2)/8] |= 1 << ((i + 2) % 8)
		}
	}
	b := append([]byte{0x00}, nulls...)
	for _, v := range r {
		if v != nil {
			b = appendLenEncString(b, *v)
		}
	}
	return b
}

// columnDef encodes a Protocol::ColumnDefinition41 for a VARCHAR column;
// extended: with MariaDB's extended type information, none, as MariaDB
// sends for a plain VARCHAR.
func columnDef(name string, extended bool) []byte {
	b := appendLenEncString(nil, "def")
	b = appendLenEncString(b, "") // schema
	b = appendLenEncString(b, "") // table
	b = appendLenEncString(b, "") // org_table
	b = appendLenEncString(b, name)
	b = appendLenEncString(b, name)
	if extended {
		b = append(b, 0) // no extended type information
	}
	b = append(b, 0x0c)
	b = append(b, 45, 0)                       // utf8mb4_general_ci
	b = append(b, 0x00, 0x00, 0x01, 0x00)      // column length 65536
	b = append(b, mysql.MYSQL_TYPE_VAR_STRING) // type
	b = append(b, 0, 0)                        // flags
	b = append(b, 0)                           // decimals
	return append(b, 0, 0)                     // filler
}
