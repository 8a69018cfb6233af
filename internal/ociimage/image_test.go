package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// staticProgram builds a tiny static Go program to stand in for lockproxy.
func staticProgram(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"in the image\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "lockproxy")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// readTar returns the regular files of a tar by name, and every header.
func readTar(t *testing.T, r io.Reader) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	files, headers := map[string][]byte{}, map[string]*tar.Header{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, headers
		}
		if err != nil {
			t.Fatal(err)
		}
		headers[h.Name] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		}
	}
}

// blob reads the blob a descriptor names and checks its digest and size.
func blob(t *testing.T, files map[string][]byte, d descriptor) []byte {
	t.Helper()
	b, ok := files[blobPath(d.Digest)]
	if !ok {
		t.Fatalf("no blob %s", d.Digest)
	}
	if got := fmt.Sprintf("sha256:%x", sha256.Sum256(b)); got != d.Digest || len(b) != d.Size {
		t.Fatalf("blob %s has digest %s and size %d (descriptor: %d)", d.Digest, got, len(b), d.Size)
	}
	return b
}

func decodeJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
}

// TestArchive builds an image and reads it back as podman, Docker and a
// runtime would: the OCI index, manifest and config with every digest
// checked, the docker-archive manifest, and the layer's files, owners and
// modes; then runs the binary from the unpacked root file system. Two
// builds from the same inputs are byte for byte the same.
func TestArchive(t *testing.T) {
	bin := staticProgram(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := func(out string) []byte {
		var errb bytes.Buffer
		args := []string{"-binary", bin, "-o", out, "-tag", "lockproxy:test", "-version", "1.2.3", "-ca-certs", ca, "-created", "2026-01-02T03:04:05Z"}
		if code := run(args, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	archive := build(filepath.Join(dir, "a.tar"))
	if again := build(filepath.Join(dir, "b.tar")); !bytes.Equal(archive, again) {
		t.Error("two builds from the same inputs differ")
	}
	files, _ := readTar(t, bytes.NewReader(archive))
	if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout %q", got)
	}
	var idx index
	decodeJSON(t, files["index.json"], &idx)
	if len(idx.Manifests) != 1 {
		t.Fatalf("index has %d manifests", len(idx.Manifests))
	}
	md := idx.Manifests[0]
	if md.Annotations["org.opencontainers.image.ref.name"] != "lockproxy:test" || md.Platform == nil || md.Platform.Architecture != runtime.GOARCH {
		t.Errorf("index entry %+v: want the tag and linux/%s", md, runtime.GOARCH)
	}
	var man manifest
	decodeJSON(t, blob(t, files, md), &man)
	if man.Config.MediaType != mediaConfig || len(man.Layers) != 1 || man.Layers[0].MediaType != mediaLayer {
		t.Fatalf("manifest %+v", man)
	}
	var cfg imageConfig
	decodeJSON(t, blob(t, files, man.Config), &cfg)
	gz := blob(t, files, man.Layers[0])

	var dm []dockerManifest
	decodeJSON(t, files["manifest.json"], &dm)
	want := []dockerManifest{{Config: blobPath(man.Config.Digest), RepoTags: []string{"lockproxy:test"}, Layers: []string{blobPath(man.Layers[0].Digest)}}}
	if !reflect.DeepEqual(dm, want) {
		t.Errorf("manifest.json %+v; want %+v", dm, want)
	}

	c := cfg.Config
	if c.User != "65532:65532" || !reflect.DeepEqual(c.Entrypoint, []string{"/usr/local/bin/lockproxy"}) ||
		!reflect.DeepEqual(c.Cmd, []string{"--config", "/etc/lockproxy/rules.yaml"}) || len(c.ExposedPorts) != 2 ||
		c.StopSignal != "SIGTERM" || c.Labels["org.opencontainers.image.version"] != "1.2.3" {
		t.Errorf("run config %+v", c)
	}
	for _, p := range []string{"3307/tcp", "9307/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed", p)
		}
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH || cfg.Created != "2026-01-02T03:04:05Z" {
		t.Errorf("config %s/%s created %s", cfg.OS, cfg.Architecture, cfg.Created)
	}

	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if d := fmt.Sprintf("sha256:%x", sha256.Sum256(raw)); len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != d {
		t.Errorf("diff_ids %v; the layer's tar is %s", cfg.RootFS.DiffIDs, d)
	}
	checkLayer(t, raw, bin, ca)
}

// checkLayer checks the layer's files, unpacks it and runs the binary.
func checkLayer(t *testing.T, raw []byte, bin, ca string) {
	t.Helper()
	lfiles, headers := readTar(t, bytes.NewReader(raw))
	binBytes, _ := os.ReadFile(bin)
	caBytes, _ := os.ReadFile(ca)
	if !bytes.Equal(lfiles[binaryPath], binBytes) || !bytes.Equal(lfiles["etc/ssl/certs/ca-certificates.crt"], caBytes) {
		t.Error("the layer's binary or CA bundle differs from its source")
	}
	if !strings.Contains(string(lfiles["etc/passwd"]), "nonroot:x:65532:65532:") || !strings.Contains(string(lfiles["etc/group"]), "nonroot:x:65532:") {
		t.Errorf("no nonroot user:\n%s%s", lfiles["etc/passwd"], lfiles["etc/group"])
	}
	for name, want := range map[string]struct {
		mode int64
		uid  int
	}{
		binaryPath: {0o755, 0}, "etc/passwd": {0o644, 0}, "home/nonroot/": {0o700, nonrootUID}, "tmp/": {0o1777, 0},
	} {
		h := headers[name]
		if h == nil || h.Mode != want.mode || h.Uid != want.uid || h.Gid != want.uid {
			t.Errorf("%s: header %+v; want mode %o owner %d", name, h, want.mode, want.uid)
		}
	}
	root := t.TempDir()
	exe := filepath.Join(root, binaryPath)
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, lfiles[binaryPath], 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "in the image") {
		t.Errorf("the image's binary: %v, %q", err, out)
	}
}

// TestRefusesDynamicBinary: a binary that needs a dynamic loader would not
// start in the image, so no archive is written for it.
func TestRefusesDynamicBinary(t *testing.T) {
	dynamic := "/bin/sh"
	f, err := elf.Open(dynamic)
	if err != nil {
		t.Fatal(err)
	}
	interp := false
	for _, p := range f.Progs {
		interp = interp || p.Type == elf.PT_INTERP
	}
	f.Close()
	if !interp {
		t.Fatalf("%s is static here; the test needs a dynamically linked ELF", dynamic)
	}
	out := filepath.Join(t.TempDir(), "image.tar")
	for _, bin := range []string{dynamic, "/etc/passwd"} {
		var errb bytes.Buffer
		if code := run([]string{"-binary", bin, "-o", out, "-ca-certs", ""}, &errb); code != 1 {
			t.Errorf("%s: exit %d; want 1", bin, code)
		}
		if !strings.Contains(errb.String(), "CGO_ENABLED=0") && !strings.Contains(errb.String(), "not an ELF") {
			t.Errorf("%s: %q does not say why", bin, errb.String())
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: an archive was written", bin)
		}
	}
}

func TestCreationTime(t *testing.T) {
	for _, c := range []struct{ flag, epoch, want string }{
		{"", "", "1970-01-01T00:00:00Z"},
		{"", "1767225600", "2026-01-01T00:00:00Z"},
		{"2026-05-06T07:08:09+02:00", "1767225600", "2026-05-06T05:08:09Z"},
	} {
		got, err := creationTime(c.flag, c.epoch)
		if err != nil || got.Format("2006-01-02T15:04:05Z07:00") != c.want {
			t.Errorf("creationTime(%q, %q) = %v, %v; want %s", c.flag, c.epoch, got, err, c.want)
		}
	}
	if _, err := creationTime("", "yesterday"); err == nil {
		t.Error("SOURCE_DATE_EPOCH=yesterday accepted")
	}
}
