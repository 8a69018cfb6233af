package main

import (
	"bufio"
	"bytes"
	"io"
	"sync"
)

// lock is the one in-memory lock of -txn-lock. A buffered channel hands it
// to the longest waiting sender when it is released, the way a FIFO lock
// queue hands a lease to its next waiter.
type lock struct{ ch chan struct{} }

func newLock() *lock { return &lock{ch: make(chan struct{}, 1)} }

func (l *lock) acquire() { l.ch <- struct{}{} }
func (l *lock) release() { <-l.ch }

// holder is one connection's part in the lock: commands takes it at a
// SELECT, answers gives it back when the answer to COMMIT or ROLLBACK
// arrives.
type holder struct {
	lk *lock
	mu sync.Mutex
	// held: this connection holds lk; releaseOnAnswer: its next answer
	// ends the transaction.
	held, releaseOnAnswer bool
}

const comQuery = 0x03

// commands copies client packets from src to dst whole, taking the lock
// before a SELECT is passed on and marking COMMIT and ROLLBACK.
func (h *holder) commands(dst io.Writer, src io.Reader) error {
	r := bufio.NewReaderSize(src, 16<<10)
	var hdr [4]byte
	buf := make([]byte, 0, 16<<10)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return err
		}
		n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
		buf = append(buf[:0], hdr[:]...)
		buf = append(buf, make([]byte, n)...)
		if _, err := io.ReadFull(r, buf[4:]); err != nil {
			return err
		}
		// A command starts a sequence (0); later packets of a login or of a
		// large command are passed on as they are.
		if hdr[3] == 0 && n > 0 && buf[4] == comQuery {
			h.command(buf[5:])
		}
		if _, err := dst.Write(buf); err != nil {
			return err
		}
	}
}

// command notes one COM_QUERY text before it is passed on.
func (h *holder) command(q []byte) {
	q = bytes.TrimLeft(q, " \t\r\n")
	h.mu.Lock()
	held := h.held
	h.mu.Unlock()
	switch {
	case hasWord(q, "SELECT") && !held:
		h.lk.acquire()
		h.mu.Lock()
		h.held = true
		h.mu.Unlock()
	case (hasWord(q, "COMMIT") || hasWord(q, "ROLLBACK")) && held:
		h.mu.Lock()
		h.releaseOnAnswer = true
		h.mu.Unlock()
	}
}

// hasWord reports whether q starts with word, in any case.
func hasWord(q []byte, word string) bool {
	return len(q) >= len(word) && bytes.EqualFold(q[:len(word)], []byte(word)) &&
		(len(q) == len(word) || !isWordByte(q[len(word)]))
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// answers copies the backend's bytes from src to dst, releasing the lock
// when bytes arrive after the end of the transaction was passed on, before
// they are written.
func (h *holder) answers(dst io.Writer, src io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			h.mu.Lock()
			if h.releaseOnAnswer {
				h.releaseOnAnswer, h.held = false, false
				h.lk.release()
			}
			h.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
	}
}

// drop gives the lock back if the connection ended holding it.
func (h *holder) drop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held {
		h.held, h.releaseOnAnswer = false, false
		h.lk.release()
	}
}
