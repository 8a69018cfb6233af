package proxy

import (
	"encoding/binary"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// okPayload encodes an OK packet with no info string and no session
// state: MariaDB writes neither when both are empty, with or without
// CLIENT_SESSION_TRACK.
func okPayload(affected, insertID uint64, status, warnings uint16) []byte {
	b := make([]byte, 0, 16)
	b = append(b, mysql.OK_HEADER)
	b = appendLenEncInt(b, affected)
	b = appendLenEncInt(b, insertID)
	b = binary.LittleEndian.AppendUint16(b, status)
	b = binary.LittleEndian.AppendUint16(b, warnings)
	return b
}

// eofPayload encodes an EOF packet.
func eofPayload(status, warnings uint16) []byte {
	b := []byte{mysql.EOF_HEADER, 0, 0, 0, 0}
	binary.LittleEndian.PutUint16(b[1:], warnings)
	binary.LittleEndian.PutUint16(b[3:], status)
	return b
}

// okStatus returns the status flags of an OK packet payload (header 0x00 or,
// under CLIENT_DEPRECATE_EOF, 0xfe), as a session keeps them: without
// SERVER_SESSION_STATE_CHANGED, which describes one packet only (see
// session.tracked).
func okStatus(p []byte) (uint16, bool) {
	pos := statusOffset(p)
	if pos < 0 || pos+2 > len(p) {
		return 0, false
	}
	return binary.LittleEndian.Uint16(p[pos:]) &^ mysql.SERVER_SESSION_STATE_CHANGED, true
}

// statusOffset is where an OK packet's status flags start (after the
// header, affected rows and last insert id), or -1.
func statusOffset(p []byte) int {
	_, pos, _, err := readLenEncInt(p, 1)
	if err != nil {
		return -1
	}
	if _, pos, _, err = readLenEncInt(p, pos); err != nil {
		return -1
	}
	return pos
}

// eofStatus returns the status flags of an EOF packet payload, without
// SERVER_SESSION_STATE_CHANGED (see okStatus).
func eofStatus(p []byte) (uint16, bool) {
	if len(p) < 5 {
		return 0, false
	}
	return binary.LittleEndian.Uint16(p[3:]) &^ mysql.SERVER_SESSION_STATE_CHANGED, true
}

// isEOF reports whether p is an EOF packet (as opposed to a row that starts
// with 0xfe). Under CLIENT_DEPRECATE_EOF the terminator is an OK packet with
// the 0xfe header, which is shorter than the largest payload.
func isEOF(p []byte, deprecateEOF bool) bool {
	if len(p) == 0 || p[0] != mysql.EOF_HEADER {
		return false
	}
	if deprecateEOF {
		return len(p) < maxPayload
	}
	return len(p) < 9
}

// resultWarnings returns the warning count of an OK packet (or, with
// deprecateEOF false, an EOF packet) that ends a result; 0 when the packet
// is too short to hold one.
func resultWarnings(p []byte, deprecateEOF bool) uint16 {
	pos := 1
	if p[0] == mysql.OK_HEADER || deprecateEOF {
		if pos = statusOffset(p); pos < 0 {
			return 0
		}
		pos += 2
	}
	if pos+2 > len(p) {
		return 0
	}
	return binary.LittleEndian.Uint16(p[pos:])
}

// resultStatus extracts the server status of a terminating OK or EOF.
func resultStatus(p []byte, deprecateEOF bool) uint16 {
	var st uint16
	var ok bool
	if p[0] == mysql.OK_HEADER || deprecateEOF {
		st, ok = okStatus(p)
	} else {
		st, ok = eofStatus(p)
	}
	if !ok {
		return 0
	}
	return st
}
