package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
)

// The nonroot user the image runs as: distroless's, so a volume or a
// securityContext written for the Dockerfile's image fits this one.
const (
	nonrootUID = 65532
	binaryPath = "usr/local/bin/lockproxy"
)

const passwd = `root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
`

const group = `root:x:0:
nobody:x:65534:
nonroot:x:65532:
`

// entry is one file or directory of the image's only layer.
type entry struct {
	path string // relative to /, no trailing slash
	mode int64  // permission bits; 01000 is the sticky bit, as tar has it
	uid  int
	dir  bool
	data []byte
}

// goArch maps an ELF machine to the GOARCH name OCI uses for it.
var goArch = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_386:     "386",
	elf.EM_ARM:     "arm",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
	elf.EM_RISCV:   "riscv64",
}

// staticArch returns the architecture of the ELF executable in b, or an
// error when b is not one or asks for a dynamic loader.
func staticArch(name string, b []byte) (string, error) {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return "", fmt.Errorf("%s: not an ELF executable: %w", name, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", name)
		}
	}
	arch, ok := goArch[f.Machine]
	if !ok {
		return "", fmt.Errorf("%s: unknown ELF machine %v", name, f.Machine)
	}
	return arch, nil
}

// rootfs lists the layer's entries, sorted by path.
func rootfs(binary, caCerts []byte) []entry {
	es := []entry{
		{path: "etc", mode: 0o755, dir: true},
		{path: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "etc/group", mode: 0o644, data: []byte(group)},
		{path: "home", mode: 0o755, dir: true},
		{path: "home/nonroot", mode: 0o700, uid: nonrootUID, dir: true},
		{path: "tmp", mode: 0o1777, dir: true},
		{path: "usr", mode: 0o755, dir: true},
		{path: "usr/local", mode: 0o755, dir: true},
		{path: "usr/local/bin", mode: 0o755, dir: true},
		{path: binaryPath, mode: 0o755, data: binary},
	}
	if caCerts != nil {
		es = append(es,
			entry{path: "etc/ssl", mode: 0o755, dir: true},
			entry{path: "etc/ssl/certs", mode: 0o755, dir: true},
			entry{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: caCerts})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].path < es[j].path })
	return es
}

// layer is the tar of es, gzipped, with the digests OCI names it by.
type layer struct {
	gz     []byte
	digest string // sha256 of gz: the blob's name
	diffID string // sha256 of the tar: the config's rootfs.diff_ids
}

// buildLayer writes es as a tar with every time stamp at mtime.
func buildLayer(es []entry, mtime time.Time) (layer, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, e := range es {
		h := &tar.Header{
			Name: e.path, Mode: e.mode, Uid: e.uid, Gid: e.uid,
			ModTime: mtime, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.data)),
		}
		if e.dir {
			h.Name, h.Typeflag, h.Size = e.path+"/", tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return layer{}, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return layer{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return layer{}, err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz) // no name, no mod time: the same tar gives the same bytes
	if _, err := io.Copy(zw, bytes.NewReader(raw.Bytes())); err != nil {
		return layer{}, err
	}
	if err := zw.Close(); err != nil {
		return layer{}, err
	}
	return layer{gz: gz.Bytes(), digest: sha256Digest(gz.Bytes()), diffID: sha256Digest(raw.Bytes())}, nil
}

// sha256Digest is b's digest as OCI writes it: "sha256:<hex>".
func sha256Digest(b []byte) string {
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}

// readOptional reads path, or returns nil when path is "".
func readOptional(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	return os.ReadFile(path)
}
