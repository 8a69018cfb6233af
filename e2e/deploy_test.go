package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// The deployment files in docs/deploy keep the promises their comments
// make: the systemd unit stops with SIGTERM and waits out the drain, the
// Kubernetes manifest probes /readyz on the admin port, sleeps before
// SIGTERM and waits out preStop plus the drain, and its rules.yaml is
// valid. (haproxy.cfg runs in TestFaultHAProxyDrain.)

func deployFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testbed.RepoRoot(), "docs", "deploy", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDeploySystemdUnit(t *testing.T) {
	unit := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(deployFile(t, "lockproxy.service")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			unit[k] = v
		}
	}
	for k, want := range map[string]string{
		"KillSignal":   "SIGTERM",
		"ExecStart":    "/usr/local/bin/lockproxy --config /etc/lockproxy/rules.yaml",
		"ExecStartPre": "/usr/local/bin/lockproxy --check --config /etc/lockproxy/rules.yaml",
		"ExecReload":   "/bin/kill -HUP $MAINPID",
	} {
		if unit[k] != want {
			t.Errorf("%s=%q; want %q", k, unit[k], want)
		}
	}
	stop, err := time.ParseDuration(unit["TimeoutStopSec"])
	if err != nil || stop <= 30*time.Second {
		t.Errorf("TimeoutStopSec=%q must outlast the default proxy.shutdown_grace (30s)", unit["TimeoutStopSec"])
	}
}

// manifest is the part of the Kubernetes objects the test reads.
type manifest struct {
	Kind string            `yaml:"kind"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template struct {
			Spec struct {
				Grace      int `yaml:"terminationGracePeriodSeconds"`
				Containers []struct {
					Args  []string `yaml:"args"`
					Ports []struct {
						Name string `yaml:"name"`
						Port int    `yaml:"containerPort"`
					} `yaml:"ports"`
					Readiness struct {
						HTTPGet struct {
							Path string `yaml:"path"`
							Port string `yaml:"port"`
						} `yaml:"httpGet"`
					} `yaml:"readinessProbe"`
					Lifecycle struct {
						PreStop struct {
							Sleep struct {
								Seconds int `yaml:"seconds"`
							} `yaml:"sleep"`
						} `yaml:"preStop"`
					} `yaml:"lifecycle"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
		Ports []struct {
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

func TestDeployKubernetesManifest(t *testing.T) {
	var objs []manifest
	for _, doc := range strings.Split(string(deployFile(t, "kubernetes.yaml")), "\n---\n") {
		var m manifest
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, m)
	}
	var rulesYAML string
	var deployments int
	for _, m := range objs {
		switch m.Kind {
		case "ConfigMap":
			rulesYAML = m.Data["rules.yaml"]
		case "Deployment":
			deployments++
			pod := m.Spec.Template.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers; want 1", len(pod.Containers))
			}
			c := pod.Containers[0]
			ports := map[string]int{}
			for _, p := range c.Ports {
				ports[p.Name] = p.Port
			}
			if ports["mysql"] != 3307 || ports["admin"] != 9307 {
				t.Errorf("container ports %v; want mysql 3307 (proxy.listen) and admin 9307 (admin.listen)", ports)
			}
			if h := c.Readiness.HTTPGet; h.Path != "/readyz" || h.Port != "admin" {
				t.Errorf("readinessProbe %+v; want GET /readyz on the admin port", h)
			}
			sleep := c.Lifecycle.PreStop.Sleep.Seconds
			if sleep <= 0 {
				t.Error("no preStop sleep: pods would get SIGTERM before their endpoints are gone")
			}
			if pod.Grace <= sleep+30 {
				t.Errorf("terminationGracePeriodSeconds %d must outlast preStop (%ds) plus shutdown_grace (30s)", pod.Grace, sleep)
			}
		case "Service":
			if len(m.Spec.Ports) != 1 || m.Spec.Ports[0].TargetPort != "mysql" {
				t.Errorf("Service ports %+v; want the mysql port only", m.Spec.Ports)
			}
		}
	}
	if deployments != 1 || rulesYAML == "" {
		t.Fatalf("want one Deployment and a ConfigMap with rules.yaml; got %d and %q", deployments, rulesYAML)
	}
	for _, want := range []string{"listen: 0.0.0.0:3307", "listen: 0.0.0.0:9307", "shutdown_grace: 30s"} {
		if !strings.Contains(rulesYAML, want) {
			t.Errorf("the ConfigMap's rules.yaml lacks %q", want)
		}
	}
	cfg := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(cfg, []byte(rulesYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "--check", "--config", cfg)
	cmd.Env = append(os.Environ(), "APP_DB_PASSWORD=secret")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("lockproxy --check on the ConfigMap's rules.yaml: %v\n%s", err, out)
	}
}
