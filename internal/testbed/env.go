package testbed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// errEnv is wrapped by every problem with a bed's env file.
var errEnv = errors.New("testbed: bad env file")

// ReadEnv reads DIR/env, the variables `scripts/testbed.sh up DIR` writes
// for a bed (LOCKPROXY_PRIMARY, LOCKPROXY_DB_USER, ...): the one reader of
// that file, for the tests and the benchmarks alike.
func ReadEnv(dir string) (map[string]string, error) {
	f, err := os.Open(filepath.Join(dir, "env"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env, err := parseEnv(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return env, nil
}

// load reads the bed in DIR (ReadEnv).
func load(dir string) (*Bed, error) {
	env, err := ReadEnv(dir)
	if err != nil {
		return nil, err
	}
	name := filepath.Join(dir, "env")
	b := &Bed{
		Dir:         dir,
		PrimaryAddr: env["LOCKPROXY_PRIMARY"],
		ReplicaAddr: env["LOCKPROXY_REPLICA"],
		RedisAddr:   env["LOCKPROXY_REDIS"],
		User:        env["LOCKPROXY_DB_USER"],
		Password:    env["LOCKPROXY_DB_PASSWORD"],
		TLSUser:     env["LOCKPROXY_TLS_USER"],
		TLSCA:       env["LOCKPROXY_TLS_CA"],
		TLSCert:     env["LOCKPROXY_TLS_CERT"],
		TLSKey:      env["LOCKPROXY_TLS_KEY"],
		env:         env,
	}
	for _, k := range []string{"LOCKPROXY_PRIMARY", "LOCKPROXY_REPLICA", "LOCKPROXY_REDIS", "LOCKPROXY_DB_USER"} {
		if env[k] == "" {
			return nil, fmt.Errorf("%s: %w: %s is missing", name, errEnv, k)
		}
	}
	return b, nil
}

// parseEnv reads KEY=value lines; blank lines and # comments are skipped.
// Values are taken literally (the script writes no quotes).
func parseEnv(r io.Reader) (map[string]string, error) {
	env := make(map[string]string)
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("%w: line %d: want KEY=value, got %q", errEnv, n, line)
		}
		env[k] = v
	}
	return env, sc.Err()
}

// Environ returns the bed's variables (LOCKPROXY_PRIMARY, LOCKPROXY_REPLICA,
// LOCKPROXY_REDIS, LOCKPROXY_DB_USER, LOCKPROXY_DB_PASSWORD, and the pid,
// log and socket paths) as sorted KEY=value strings, ready to append to
// os.Environ() for a lockproxy process reading rules.yaml.
func (b *Bed) Environ() []string {
	out := make([]string, 0, len(b.env))
	for k, v := range b.env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Getenv returns one of the bed's variables, or "".
func (b *Bed) Getenv(key string) string { return b.env[key] }

// reachable dials every server once.
func (b *Bed) reachable(ctx context.Context) error {
	var d net.Dialer
	for _, addr := range []string{b.PrimaryAddr, b.ReplicaAddr, b.RedisAddr} {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		c.Close()
	}
	return nil
}
