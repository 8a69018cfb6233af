package e2e

import (
	"bufio"
	"bytes"
	"fmt"
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
// Kubernetes manifest probes /readyz on the admin port, waits before
// SIGTERM with a preStop hook the image can run (lockproxy sleep), waits
// out preStop plus the drain, and its rules.yaml is valid. (haproxy.cfg runs in TestFaultHAProxyDrain.)

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
							Exec struct {
								Command []string `yaml:"command"`
							} `yaml:"exec"`
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

// kubernetesObjects parses docs/deploy/kubernetes.yaml.
func kubernetesObjects(t *testing.T) []manifest {
	t.Helper()
	var objs []manifest
	for _, doc := range strings.Split(string(deployFile(t, "kubernetes.yaml")), "\n---\n") {
		var m manifest
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, m)
	}
	return objs
}

// kubernetesPreStop is the manifest's preStop command, for TestImage to
// run in the image.
func kubernetesPreStop(t *testing.T) []string {
	t.Helper()
	for _, m := range kubernetesObjects(t) {
		if m.Kind == "Deployment" && len(m.Spec.Template.Spec.Containers) == 1 {
			return m.Spec.Template.Spec.Containers[0].Lifecycle.PreStop.Exec.Command
		}
	}
	t.Fatal("no Deployment with one container in kubernetes.yaml")
	return nil
}

// preStopDelay is how long the preStop command waits: it must be the
// image's lockproxy (distroless has no sleep(1)) running `sleep DURATION`.
func preStopDelay(command []string) (time.Duration, error) {
	if len(command) != 3 || command[0] != "/usr/local/bin/lockproxy" || command[1] != "sleep" {
		return 0, fmt.Errorf("preStop runs %q; want /usr/local/bin/lockproxy sleep DURATION, the only program in the image", command)
	}
	d, err := time.ParseDuration(command[2])
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("preStop waits %q: want a positive duration", command[2])
	}
	return d, nil
}

func TestDeployKubernetesManifest(t *testing.T) {
	objs := kubernetesObjects(t)
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
			delay, err := preStopDelay(c.Lifecycle.PreStop.Exec.Command)
			if err != nil {
				t.Errorf("%v: pods would get SIGTERM before their endpoints are gone", err)
			}
			if time.Duration(pod.Grace)*time.Second <= delay+30*time.Second {
				t.Errorf("terminationGracePeriodSeconds %d must outlast preStop (%v) plus shutdown_grace (30s)", pod.Grace, delay)
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
