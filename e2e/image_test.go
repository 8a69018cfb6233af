package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// podman runs podman on a private image store under a test's temporary
// directory, so a test neither sees nor leaves images or containers of
// the machine's own.
type podman struct {
	t    *testing.T
	base []string
}

func newPodman(t *testing.T) *podman {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatalf("podman not installed (scripts/testbed.sh install-podman): %v", err)
	}
	dir := t.TempDir()
	p := &podman{t: t, base: []string{
		"--root", filepath.Join(dir, "storage"), "--runroot", filepath.Join(dir, "run"),
		"--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file",
	}}
	// crun, podman's default runtime on Debian, refuses hosts that mount
	// cgroup v1 and v2 side by side ("cgroups in hybrid mode not
	// supported"); runc runs there too.
	if runc, err := exec.LookPath("runc"); err == nil {
		p.base = append(p.base, "--runtime", runc)
	}
	t.Cleanup(func() { _, _ = p.run("rm", "--force", "--all") })
	return p
}

// run runs podman and returns its stdout.
func (p *podman) run(args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command("podman", append(append([]string{}, p.base...), args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("podman %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func (p *podman) must(args ...string) string {
	p.t.Helper()
	out, err := p.run(args...)
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

// limits are --ulimit flags at or below this process's hard limits. By
// default podman asks for more open files and processes than it has,
// which fails where root lacks CAP_SYS_RESOURCE ("setrlimit RLIMIT_NOFILE:
// operation not permitted"); 4096 processes are plenty for one lockproxy.
func limits(t *testing.T) []string {
	var nofile syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		t.Fatal(err)
	}
	n := strconv.FormatUint(nofile.Max, 10)
	return []string{"--ulimit", "nofile=" + n + ":" + n, "--ulimit", "nproc=4096:4096"}
}

// imageConfig is the part of `podman image inspect` the test checks.
type imageConfig struct {
	Config struct {
		User         string
		Entrypoint   []string
		Cmd          []string
		ExposedPorts map[string]struct{}
	}
}

// TestImage runs lockproxy's container image as a cluster would, against
// the bed over host networking: the image's own entrypoint, command and
// user; a guarded write and a locked read through it; /healthz, /readyz
// and /metrics on the admin port; then the Kubernetes manifest's preStop
// hook (`lockproxy sleep`, run inside the container), SIGTERM, and the
// drain: the open transaction commits, the container exits 0 and the lock
// is free for another instance. `make image-test` builds the image with
// `make image` and runs this with LOCKPROXY_IMAGE naming it; without it
// (as in `make test`) the test builds the same image itself.
func TestImage(t *testing.T) {
	pm := newPodman(t)
	archive := os.Getenv("LOCKPROXY_IMAGE")
	if archive == "" {
		archive = buildImage(t)
	}
	ref := loadImage(t, pm, archive)
	if out := pm.must(append(append([]string{"run", "--rm", "--network", "host"}, limits(t)...), ref, "--version")...); !strings.HasPrefix(out, "lockproxy ") {
		t.Fatalf("lockproxy --version in the image printed %q", out)
	}

	bed := testbed.Get(t)
	const dbName = "e2e_image"
	keyedTable(t, bed, dbName)
	addr, admin := freePort(t), freePort(t)
	ctr := runImage(t, pm, bed, ref, imageRules(bed, addr, admin, dbName))
	testbed.Eventually(t, time.Minute, "the container's admin port answers /healthz", func() bool {
		if state, _ := pm.run("inspect", "--format", "{{.State.Status}}", ctr); strings.TrimSpace(state) == "exited" {
			t.Fatalf("the container exited:\n%s", containerLogs(pm, ctr))
		}
		code, _ := httpStatus("http://" + admin + "/healthz")
		return code == http.StatusOK
	})
	if logs := containerLogs(pm, ctr); strings.Contains(logs, "can be read by other users") {
		t.Errorf("lockproxy warns of a readable password in a config that holds none:\n%s", logs)
	}
	if uid := containerUID(t, pm, ctr); uid != "65532" {
		t.Errorf("lockproxy runs as uid %s in the container; want the image's nonroot 65532", uid)
	}

	db := open(t, bed, addr, dbName, "", 2)
	if res, err := db.Exec("UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1"); err != nil {
		t.Fatalf("guarded update through the container: %v", err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("guarded update changed %d rows", n)
	}
	var me *mysql.MySQLError
	if _, err := db.Exec("DELETE FROM sku_stock"); !errors.As(err, &me) || me.Number != 1105 || !strings.HasPrefix(me.Message, "lockproxy:") {
		t.Fatalf("an unkeyed write under the rule: %v; want 1105 from lockproxy", err)
	}
	busy := testbed.Conn(t, db)
	execOn(t, busy, "BEGIN")
	var stock int
	if err := busy.QueryRowContext(context.Background(), "SELECT stock FROM sku_stock WHERE sku_id = 2 FOR UPDATE").Scan(&stock); err != nil || stock != 10 {
		t.Fatalf("locked read: %d, %v", stock, err)
	}
	metrics := get(t, "http://"+admin+"/metrics")
	for _, want := range []string{`lockproxy_lock_acquire_total{result="acquired",rule="sku-stock"} 2`, "lockproxy_locks_held 1"} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, body := httpStatus("http://" + admin + "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz %d %s before the stop", code, body)
	}

	preStopAndTerm(t, pm, ctr, addr, admin)
	// The transaction open at SIGTERM finishes, then lockproxy exits.
	execOn(t, busy, "UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 2", "COMMIT")
	committed := time.Now()
	code := strings.TrimSpace(pm.must("wait", ctr))
	t.Logf("the container exited %s %v after the last COMMIT", code, time.Since(committed).Round(time.Millisecond))
	logs := containerLogs(pm, ctr)
	if code != "0" || !strings.Contains(logs, "draining") || !strings.Contains(logs, `"stopped"`) {
		t.Fatalf("the container exited with %s; want 0 after draining and stopping:\n%s", code, logs)
	}
	direct := open(t, bed, bed.PrimaryAddr, dbName, "", 1)
	if err := direct.QueryRow("SELECT (SELECT stock FROM sku_stock WHERE sku_id = 1) + 10 * (SELECT stock FROM sku_stock WHERE sku_id = 2)").Scan(&stock); err != nil || stock != 99 {
		t.Fatalf("stock 1 + 10 * stock 2 = %d, %v; want 9 + 90", stock, err)
	}
	// The lock the drained container held is free at once (wait_timeout
	// 2s; a leaked one would last its 30s lease).
	other := start(t, bed, redisLocks(bed, "30s", "2s"), saleRule(dbName))
	c := testbed.Conn(t, open(t, bed, other.addr, dbName, "", 1))
	execOn(t, c, "BEGIN", "SELECT stock FROM sku_stock WHERE sku_id = 2 FOR UPDATE", "COMMIT")
}

// loadImage loads the archive and checks what the image runs and as whom;
// it returns the image's name.
func loadImage(t *testing.T, pm *podman, archive string) string {
	t.Helper()
	out := pm.must("load", "--input", archive)
	_, ref, ok := strings.Cut(out, "Loaded image: ")
	ref = strings.TrimSpace(ref)
	if !ok || ref == "" {
		t.Fatalf("podman load named no image: %q", out)
	}
	var cfgs []imageConfig
	if err := json.Unmarshal([]byte(pm.must("image", "inspect", ref)), &cfgs); err != nil || len(cfgs) != 1 {
		t.Fatalf("podman image inspect %s: %v", ref, err)
	}
	// The archive's docker-archive half (manifest.json, what docker load
	// reads) names the same image.
	id := strings.TrimSpace(pm.must("image", "inspect", "--format", "{{.Id}}", ref))
	if viaDocker := strings.TrimSpace(pm.must("pull", "--quiet", "docker-archive:"+archive)); viaDocker != id {
		t.Errorf("as a docker-archive the image is %q; as an OCI archive %q", viaDocker, id)
	}
	c := cfgs[0].Config
	if c.User != "65532:65532" || !reflect.DeepEqual(c.Entrypoint, []string{"/usr/local/bin/lockproxy"}) ||
		!reflect.DeepEqual(c.Cmd, []string{"--config", "/etc/lockproxy/rules.yaml"}) {
		t.Errorf("image config %+v; want lockproxy --config /etc/lockproxy/rules.yaml as 65532", c)
	}
	for _, p := range []string{"3307/tcp", "9307/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("the image does not expose %s", p)
		}
	}
	return ref
}

// imageRules is a rules.yaml on the bed: primary, replica, Redis locks,
// the sale rule; the password comes from the environment, as in the
// Kubernetes manifest.
func imageRules(bed *testbed.Bed, addr, admin, dbName string) string {
	return fmt.Sprintf(`proxy:
  listen: %s
  shutdown_grace: 20s
admin:
  listen: %s
users:
  - user: %s
    password: ${APP_DB_PASSWORD}
backends:
  primary: %s
  replicas: [%s]
%s
%s`, addr, admin, bed.User, bed.PrimaryAddr, bed.ReplicaAddr, redisLocks(bed, "30s", "5s"), saleRule(dbName))
}

// runImage starts the image with rules mounted where its command reads
// them, as the Kubernetes manifest's ConfigMap is, and returns the
// container's name.
func runImage(t *testing.T, pm *podman, bed *testbed.Bed, ref, rules string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "rules.yaml")
	// Readable by the image's user, as a ConfigMap's files are.
	if err := os.WriteFile(cfg, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	name := "lockproxy-" + strconv.Itoa(os.Getpid())
	args := append([]string{"run", "--detach", "--name", name, "--network", "host",
		"--volume", cfg + ":/etc/lockproxy/rules.yaml:ro", "--env", "APP_DB_PASSWORD=" + bed.Password}, limits(t)...)
	pm.must(append(args, ref)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("container log:\n%s", tail(containerLogs(pm, name), 60))
		}
	})
	return name
}

// preStopAndTerm stops the container as the kubelet does: the preStop
// hook runs in the container while lockproxy still serves, then SIGTERM
// starts the drain: the listener closes and /readyz answers 503.
func preStopAndTerm(t *testing.T, pm *podman, ctr, addr, admin string) {
	t.Helper()
	hook := kubernetesPreStop(t)
	began := time.Now()
	if out, err := pm.run(append([]string{"exec", ctr}, hook...)...); err != nil {
		t.Fatalf("the preStop hook %q: %v %s", hook, err, out)
	}
	t.Logf("the preStop hook %q returned after %v", hook, time.Since(began).Round(time.Millisecond))
	if code, body := httpStatus("http://" + admin + "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz %d %s after the preStop hook: lockproxy must serve until SIGTERM", code, body)
	}
	pm.must("kill", "--signal", "TERM", ctr)
	testbed.Eventually(t, 10*time.Second, "the proxy listener closes after SIGTERM", func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	if code, _ := httpStatus("http://" + admin + "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz %d while draining; want 503", code)
	}
}

// httpStatus GETs url: the status code and body, or 0 when unreachable.
func httpStatus(url string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// containerUID reads the real uid of the container's main process.
func containerUID(t *testing.T, pm *podman, ctr string) string {
	t.Helper()
	pid := strings.TrimSpace(pm.must("inspect", "--format", "{{.State.Pid}}", ctr))
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("no Uid line in /proc/%s/status", pid)
	return ""
}

// containerLogs is what the container wrote to stdout and stderr.
func containerLogs(pm *podman, ctr string) string {
	out, err := exec.Command("podman", append(append([]string{}, pm.base...), "logs", ctr)...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("podman logs: %v: %s", err, out)
	}
	return string(out)
}

// buildImage builds the image as `make image` does, into a temporary
// directory, and returns the archive's path.
func buildImage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin, archive := filepath.Join(dir, "lockproxy"), filepath.Join(dir, "lockproxy-image.tar")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=e2e", "-o", bin, "../cmd/lockproxy")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build of lockproxy: %v\n%s", err, out)
	}
	pack := exec.Command("go", "run", "../internal/ociimage", "-binary", bin, "-tag", "lockproxy:e2e", "-version", "e2e", "-o", archive)
	if out, err := pack.CombinedOutput(); err != nil {
		t.Fatalf("ociimage: %v\n%s", err, out)
	}
	return archive
}
