package env

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
)

// SetupOptions say how Setup prepares an Env.
type SetupOptions struct {
	Root   string      // the lockproxy checkout
	Name   string      // prefix of log lines and of the scratch directory ("bench", "soak")
	Binary string      // a prebuilt lockproxy; "" builds ./cmd/lockproxy
	Relay  bool        // also build bench/cmd/relay
	Bed    string      // a running bed to reuse (left running); "" starts one in scratch
	Keep   bool        // keep the scratch directory
	Log    *log.Logger // where progress goes
}

// Setup makes a scratch directory, builds (or takes) the lockproxy binary,
// builds the relay when asked and starts (or reuses) the bed. The cleanup
// it returns stops a bed it started and removes the scratch directory
// (unless Keep); on error it has already run.
func Setup(ctx context.Context, o SetupOptions) (*Env, func(), error) {
	work, err := os.MkdirTemp("", "lockproxy-"+o.Name+"-")
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.Name, err)
	}
	cleanups := []func(){func() {
		if o.Keep {
			o.Log.Printf("%s: scratch kept in %s", o.Name, work)
			return
		}
		_ = os.RemoveAll(work)
	}}
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	e := &Env{Root: o.Root, Binary: o.Binary, WorkDir: work, Log: o.Log}
	if e.Binary == "" {
		o.Log.Printf("%s: go build ./cmd/lockproxy", o.Name)
		if e.Binary, err = Build(ctx, o.Root, work); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	if o.Relay {
		o.Log.Printf("%s: go build ./bench/cmd/relay", o.Name)
		if e.RelayBinary, err = BuildRelay(ctx, o.Root, work); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	bedDir, reuse := o.Bed, o.Bed != ""
	if !reuse {
		bedDir = filepath.Join(work, "bed")
	}
	o.Log.Printf("%s: test bed in %s", o.Name, bedDir)
	if e.Bed, err = Up(ctx, o.Root, bedDir, reuse); err != nil {
		cleanup()
		return nil, nil, err
	}
	cleanups = append(cleanups, func() {
		if err := e.Bed.Down(context.Background()); err != nil {
			o.Log.Printf("%s: %v", o.Name, err)
		}
	})
	return e, cleanup, nil
}

// ErrNoRoot is returned when no lockproxy checkout is found above the
// working directory.
var ErrNoRoot = errors.New("run me inside the lockproxy checkout (no go.mod of github.com/lockproxy/lockproxy found)")

// RepoRoot walks up from the working directory to the lockproxy go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/lockproxy/lockproxy\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoRoot
		}
		dir = parent
	}
}
