// Command ociimage assembles lockproxy's container image without a
// registry or a container engine: one layer holding a static lockproxy
// binary, /etc/passwd and /etc/group with the nonroot user (65532), the
// host's CA certificates and a writable /tmp, under a config that runs
// lockproxy as that user with the ports of proxy.listen and admin.listen
// exposed, as the Dockerfile's distroless image does. `make image` runs it:
//
//	CGO_ENABLED=0 go build -o bin/image/lockproxy ./cmd/lockproxy
//	go run ./internal/ociimage -binary bin/image/lockproxy -tag lockproxy:latest -o bin/lockproxy-image.tar
//
// The output is one tar file that is both an OCI image layout (index.json)
// and a docker-archive (manifest.json), so `podman load`, `docker load`
// and `skopeo copy oci-archive:...` all read it. The same inputs give the
// same bytes: every time stamp is -created (default $SOURCE_DATE_EPOCH,
// else the Unix epoch) and the files go in sorted order.
//
// It refuses a binary that is not a static ELF executable: a dynamically
// linked one would fail in the image with "no such file or directory".
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run parses args, writes the image and returns the exit status.
func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("ociimage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	binary := fs.String("binary", "", "the static lockproxy binary to put in the image (required)")
	out := fs.String("o", "lockproxy-image.tar", "the image archive to write")
	tag := fs.String("tag", "lockproxy:latest", "the name:tag the archive gives the image")
	version := fs.String("version", "dev", "the image's org.opencontainers.image.version label")
	caCerts := fs.String("ca-certs", "/etc/ssl/certs/ca-certificates.crt", `CA bundle to install as /etc/ssl/certs/ca-certificates.crt ("" for none)`)
	created := fs.String("created", "", "the image's creation time, RFC 3339 (default $SOURCE_DATE_EPOCH, else 1970-01-01T00:00:00Z)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *binary == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: ociimage -binary PATH [-o OUT] [-tag NAME:TAG] [-version V] [-ca-certs PATH] [-created TIME]")
		return 2
	}
	when, err := creationTime(*created, os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		fmt.Fprintln(stderr, "ociimage:", err)
		return 2
	}
	spec := imageSpec{tag: *tag, version: *version, created: when}
	if err := spec.load(*binary, *caCerts); err != nil {
		fmt.Fprintln(stderr, "ociimage:", err)
		return 1
	}
	if err := writeFileAtomic(*out, spec.writeArchive); err != nil {
		fmt.Fprintln(stderr, "ociimage:", err)
		return 1
	}
	return 0
}

// creationTime is flagValue as RFC 3339, else epoch as Unix seconds, else
// the Unix epoch.
func creationTime(flagValue, epoch string) (time.Time, error) {
	switch {
	case flagValue != "":
		t, err := time.Parse(time.RFC3339, flagValue)
		if err != nil {
			return time.Time{}, fmt.Errorf("-created: %w", err)
		}
		return t.UTC(), nil
	case epoch != "":
		s, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		return time.Unix(s, 0).UTC(), nil
	}
	return time.Unix(0, 0).UTC(), nil
}

// writeFileAtomic writes path through write into a temporary file beside
// it and renames it into place, so a failed run leaves no half archive.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".ociimage-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
