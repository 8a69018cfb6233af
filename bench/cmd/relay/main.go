// Command relay is the floor the benchmarks hold lockproxy against: a TCP
// relay that parses nothing. It listens, and for every connection it
// accepts it dials the target and copies bytes both ways with io.Copy
// (which Go turns into splice(2) between two TCP sockets on Linux) until
// either side ends, then closes both.
//
//	relay -listen 127.0.0.1:0 -to 127.0.0.1:3306
//
// Once listening it prints the bound address (host:port) on one line on
// standard output, so a caller that asked for port 0 learns the port. It
// runs until SIGINT or SIGTERM.
//
// With -txn-lock it is the floor for a proxy that locks rows outside the
// database, as lockproxy's lock rule does: one in-memory lock, handed to
// its waiters first come first served, is taken when a client sends a
// COM_QUERY that starts with SELECT and held until the first bytes of the
// backend's answer to that client's next COMMIT or ROLLBACK arrive (before
// they are passed on, as lockproxy releases). It reads client packets whole
// to see their commands, so it assumes clients that wait for each answer
// before the next command, as the benchmarks' do.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
}

// run parses args, listens, announces the bound address on out and serves
// until a signal arrives.
func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (port 0: any free port)")
	to := fs.String("to", "", "host:port every accepted connection is relayed to")
	txnLock := fs.Bool("txn-lock", false, "hold one in-memory lock from a client's SELECT until the answer to its COMMIT or ROLLBACK")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *to == "" {
		return errors.New("-to host:port is required")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if _, err := fmt.Fprintln(out, ln.Addr().String()); err != nil {
		_ = ln.Close()
		return fmt.Errorf("announce address: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	logger := log.New(os.Stderr, "relay: ", log.LstdFlags)
	var lk *lock
	if *txnLock {
		lk = newLock()
	}
	err = serve(ln, *to, lk, logger)
	if ctx.Err() != nil {
		return nil // stopped by a signal
	}
	return err
}

// serve accepts connections on ln until it is closed and relays each to
// target, holding lk as -txn-lock says when lk is not nil. It returns the
// error that ended accepting; connections in flight are left to finish on
// their own.
func serve(ln net.Listener, target string, lk *lock, logger *log.Logger) error {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Temporary trouble (out of fds): back off, as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			logger.Printf("accept: %v; retrying in %s", err, delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		go relay(c, target, lk, logger)
	}
}

// relay dials target for the accepted connection c and copies both ways
// (through lk's hold when lk is not nil); when either direction ends (EOF
// or error) both connections are closed, which ends the other direction
// too.
func relay(c net.Conn, target string, lk *lock, logger *log.Logger) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", target, 10*time.Second)
	if err != nil {
		logger.Printf("dial %s: %v", target, err)
		return
	}
	defer up.Close()
	setNoDelay(c)
	setNoDelay(up)
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			_ = c.Close()
			_ = up.Close()
		})
	}
	var h *holder
	if lk != nil {
		h = &holder{lk: lk}
		defer h.drop()
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if h != nil {
			_ = h.commands(up, c)
		} else {
			_, _ = io.Copy(up, c)
		}
		closeBoth()
	}()
	go func() {
		defer wg.Done()
		if h != nil {
			_ = h.answers(c, up)
		} else {
			_, _ = io.Copy(c, up)
		}
		closeBoth()
	}()
	wg.Wait()
}

// setNoDelay makes sure small writes go out at once (Go's default for TCP,
// stated here because the relay's latency is the point).
func setNoDelay(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
}
