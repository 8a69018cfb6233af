package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"testing"
	"time"
)

// packetUpstream answers every packet with a packet carrying the same
// payload, and records the COM_QUERY texts in the order it read them.
func packetUpstream(t *testing.T) (addr string, seen func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	ln := serveEach(t, func(c net.Conn) {
		for {
			p, err := readPacket(c)
			if err != nil {
				return
			}
			mu.Lock()
			got = append(got, string(p[1:]))
			mu.Unlock()
			if err := writePacket(c, 1, p); err != nil {
				return
			}
		}
	})
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

func readPacket(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	p := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
	_, err := io.ReadFull(r, p)
	return p, err
}

func writePacket(w io.Writer, seq byte, p []byte) error {
	_, err := w.Write(append([]byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), seq}, p...))
	return err
}

// query sends one COM_QUERY and waits for its answer.
func query(c net.Conn, q string) error {
	if err := writePacket(c, 0, append([]byte{comQuery}, q...)); err != nil {
		return err
	}
	p, err := readPacket(c)
	if err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	if string(p[1:]) != q {
		return fmt.Errorf("answer to %q: %q", q, p[1:])
	}
	return nil
}

func mustQuery(t *testing.T, c net.Conn, q string) {
	t.Helper()
	if err := query(c, q); err != nil {
		t.Fatal(err)
	}
}

// TestTxnLockHoldsFromSelectToCommit: a second client's SELECT reaches the
// backend only after the first client's COMMIT was answered, and a client
// that goes away holding the lock gives it back.
func TestTxnLockHoldsFromSelectToCommit(t *testing.T) {
	target, seen := packetUpstream(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() { _ = serve(ln, target, newLock(), log.New(io.Discard, "", 0)) }()
	a, b := dial(t, ln.Addr().String()), dial(t, ln.Addr().String())

	mustQuery(t, a, "BEGIN")
	mustQuery(t, a, "select stock from t where id = 1")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := query(b, "SELECT stock FROM t WHERE id = 1 -- b"); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-done:
		t.Fatal("b's SELECT was answered while a held the lock")
	case <-time.After(200 * time.Millisecond):
	}
	mustQuery(t, a, "UPDATE t SET stock = 1 WHERE id = 1")
	mustQuery(t, a, "COMMIT")
	<-done
	want := []string{"BEGIN", "select stock from t where id = 1", "UPDATE t SET stock = 1 WHERE id = 1", "COMMIT", "SELECT stock FROM t WHERE id = 1 -- b"}
	if got := seen(); len(got) != len(want) {
		t.Fatalf("backend saw %q, want %q", got, want)
	} else {
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("backend saw %q, want %q", got, want)
			}
		}
	}

	// b holds the lock now and goes away: a can take it again.
	_ = b.Close()
	got := make(chan struct{})
	go func() {
		defer close(got)
		if err := query(a, "SELECT 1"); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the lock of a closed connection was never given back")
	}
}
