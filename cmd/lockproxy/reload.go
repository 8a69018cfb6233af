package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lockproxy/lockproxy/proxy"
	"github.com/lockproxy/lockproxy/rules"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// reloader reloads rules.yaml on SIGHUP and when the file changes. A config
// that fails validation is logged with every problem and the old one stays.
type reloader struct {
	path    string
	srv     *proxy.Server
	log     *zap.Logger
	results *prometheus.CounterVec
	modTime time.Time
	// loaded, when set, is told of each configuration a reload applied.
	loaded func(*rules.Config)
}

func newReloader(path string, srv *proxy.Server, reg prometheus.Registerer, log *zap.Logger) *reloader {
	r := &reloader{
		path: path, srv: srv, log: log,
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockproxy_config_reloads_total",
			Help: "Config reloads by result (success|failure).",
		}, []string{"result"}),
	}
	reg.MustRegister(r.results)
	for _, res := range []string{"success", "failure"} {
		r.results.WithLabelValues(res)
	}
	if st, err := os.Stat(path); err == nil {
		r.modTime = st.ModTime()
	}
	return r
}

func (r *reloader) watch(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.reload("SIGHUP")
		case <-tick.C:
			if st, err := os.Stat(r.path); err == nil && !st.ModTime().Equal(r.modTime) {
				r.reload("file changed")
			}
		}
	}
}

// reload loads the file once per change: the version it read is the one
// the watcher compares against, whatever triggered the reload.
func (r *reloader) reload(why string) {
	if st, err := os.Stat(r.path); err == nil {
		r.modTime = st.ModTime()
	}
	cfg, err := rules.Load(r.path)
	if err == nil {
		err = r.srv.Reload(cfg)
	}
	if err != nil {
		r.results.WithLabelValues("failure").Inc()
		r.log.Error("config reload failed; keeping the old config", zap.String("trigger", why), zap.Error(err))
		return
	}
	r.results.WithLabelValues("success").Inc()
	if r.loaded != nil {
		r.loaded(cfg)
	}
	r.log.Info("config reloaded", zap.String("trigger", why))
}
