// Command lockproxy runs the MySQL-protocol proxy (README.md, docs/):
//
//	lockproxy --config rules.yaml          run
//	lockproxy --check --config rules.yaml  validate and exit
//	lockproxy explain --config rules.yaml "SQL"
//	lockproxy check --config rules.yaml --log general.log
//	lockproxy sleep 5s                     wait (a preStop hook without sleep(1))
//	lockproxy --version
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/lockproxy/lockproxy/proxy"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "explain" {
		return explain(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "check" {
		return checkWorkload(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "sleep" {
		return sleepFor(args[1:], stderr)
	}
	fs := flag.NewFlagSet("lockproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "rules.yaml", "path to rules.yaml")
	check := fs.Bool("check", false, "validate the config, print every problem, and exit")
	showVersion := fs.Bool("version", false, "print the version and exit")
	logFormat := fs.String("log-format", "json", "log format: json or console")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	authPlugin := fs.String("auth-plugin", "mysql_native_password", "auth plugin announced to clients: mysql_native_password or caching_sha2_password")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "lockproxy %s\n", version)
		return 0
	}
	cfg, err := rules.Load(*configPath)
	if err != nil {
		printErr(stderr, err)
		return 1
	}
	if *check {
		fmt.Fprintf(stdout, "%s: ok\n", *configPath)
		if w := probeLockService(cfg); w != "" {
			fmt.Fprintf(stdout, "%s: warning: %s\n", *configPath, w)
		}
		return 0
	}
	log, err := newLogger(*logFormat, *logLevel)
	if err != nil {
		printErr(stderr, err)
		return 2
	}
	defer func() { _ = log.Sync() }()
	warnIfReadable(*configPath, cfg, log)
	raiseFDLimit(cfg.Proxy, log)
	setMemoryLimit(cfg.Proxy, log)
	if err := serve(cfg, *configPath, *authPlugin, log); err != nil {
		log.Error("lockproxy stopped", zap.Error(err))
		return 1
	}
	return 0
}

func newLogger(format, level string) (*zap.Logger, error) {
	var zc zap.Config
	switch format {
	case "json":
		zc = zap.NewProductionConfig()
	case "console":
		zc = zap.NewDevelopmentConfig()
	default:
		return nil, fmt.Errorf("lockproxy: unknown --log-format %q", format)
	}
	lvl, err := zap.ParseAtomicLevel(level)
	if err != nil {
		return nil, fmt.Errorf("lockproxy: bad --log-level: %w", err)
	}
	zc.Level = lvl
	return zc.Build()
}

// serve runs the proxy and the admin HTTP server until SIGTERM or SIGINT,
// reloading the config on SIGHUP or when the file changes.
func serve(cfg *rules.Config, path, authPlugin string, log *zap.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	locks, err := newLocker(cfg, reg, log)
	if err != nil {
		return err
	}
	defer locks.close()
	srv, err := proxy.New(cfg, proxy.Options{Logger: log, Registry: reg, AuthPlugin: authPlugin, Locker: locks.locker})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Proxy.Listen)
	if err != nil {
		return err
	}
	admin, err := startAdmin(cfg.Admin.Listen, cfg.Admin.Token, srv, locks.ping, reg, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	log.Info("lockproxy listening", zap.String("version", version), zap.String("listen", ln.Addr().String()),
		zap.String("admin", cfg.Admin.Listen), zap.String("primary", cfg.Backends.Primary))

	reloads := newReloader(path, srv, reg, log)
	reloads.loaded = func(cfg *rules.Config) { locks.metrics.InitRules(ruleNames(cfg)) }
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go reloads.watch(ctx)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("draining", zap.Duration("grace", srv.Grace()))
	sctx, cancel := context.WithTimeout(context.Background(), srv.Grace())
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("shutdown", zap.Error(err))
	}
	_ = admin.Close()
	log.Info("stopped")
	return nil
}

// warnIfReadable warns when a config holding secrets can be read by users
// other than its owner.
func warnIfReadable(path string, cfg *rules.Config, log *zap.Logger) {
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm()&0o077 == 0 {
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return
	}
	// Secrets that come from ${VAR} are not in the file.
	secrets := []string{cfg.Admin.Token}
	if cfg.Locks.Redis != nil {
		secrets = append(secrets, cfg.Locks.Redis.Password)
	}
	for _, u := range cfg.Users {
		secrets = append(secrets, u.Password)
	}
	inFile := false
	for _, s := range secrets {
		inFile = inFile || (s != "" && bytes.Contains(raw, []byte(s)))
	}
	if inFile {
		log.Warn("the config file holds passwords and can be read by other users; chmod 600 it",
			zap.String("path", path), zap.String("mode", st.Mode().Perm().String()))
	}
}

// printErr writes err to w as one of lockproxy's own errors: with the
// "lockproxy:" prefix every error lockproxy writes starts with, added once.
func printErr(w io.Writer, err error) {
	msg := err.Error()
	if !strings.HasPrefix(msg, "lockproxy:") {
		msg = "lockproxy: " + msg
	}
	fmt.Fprintln(w, msg)
}
