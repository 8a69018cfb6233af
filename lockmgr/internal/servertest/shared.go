package servertest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
)

// Setup says how TestMain gets the shared server of a test binary.
type Setup[S any] struct {
	// Pkg prefixes the messages ("etcdlock").
	Pkg string
	// Missing, if not nil, says the server is not installed; Hint says how
	// to install it ("etcd not installed (apt-get install etcd-server)").
	Missing error
	Hint    string
	// What names the server in the start error ("etcd").
	What string
	// DirPrefix names the temporary directory ("etcdlock-test-").
	DirPrefix string
	// Start starts the server with its data under dir; Stop stops it.
	Start func(dir string) (S, error)
	Stop  func(S)
}

// Shared is the one server the tests of a package share. Main sets it up
// before the tests run; Get is then safe for concurrent use.
type Shared[S any] struct {
	srv  S
	ok   bool
	skip string
}

// Main runs the tests m with the shared server and returns the exit code.
// When the server is not installed, the tests run without it (Get skips
// them) unless CI=true: then Main fails at once.
func (sh *Shared[S]) Main(m *testing.M, su Setup[S]) int {
	if su.Missing != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, su.Pkg+":", su.Hint+":", su.Missing)
			return 1
		}
		sh.skip = su.Hint
		return m.Run()
	}
	dir, err := os.MkdirTemp(TmpRoot(), su.DirPrefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	s, err := su.Start(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, su.Pkg+": start "+su.What+":", err)
		return 1
	}
	defer su.Stop(s)
	sh.srv, sh.ok = s, true
	return m.Run()
}

// Get returns the shared server, or skips t when it is not installed
// (outside CI only: Main failed then).
func (sh *Shared[S]) Get(t testing.TB) S {
	t.Helper()
	if !sh.ok {
		t.Skip(sh.skip)
	}
	return sh.srv
}

// Own starts a server for t alone, with its data in a fresh directory
// named after dirPrefix; it is stopped and the directory removed when t
// ends. It fails t if the server does not start.
func Own[S any](t testing.TB, dirPrefix string, start func(dir string) (S, error), stop func(S)) S {
	t.Helper()
	dir, err := os.MkdirTemp(TmpRoot(), dirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	s, err := start(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(s); _ = os.RemoveAll(dir) })
	return s
}

// Unique is prefix followed by 8 random hex digits: a name (key prefix,
// root znode) no other test uses.
func Unique(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
