package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Media types of the OCI image spec (v1.1).
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// imageSpec is what goes into the image; load fills in the files.
type imageSpec struct {
	tag, version string
	created      time.Time
	arch         string
	layer        layer
}

// load reads the binary and the CA bundle and builds the layer.
func (s *imageSpec) load(binaryPath, caPath string) error {
	bin, err := os.ReadFile(binaryPath)
	if err != nil {
		return err
	}
	if s.arch, err = staticArch(binaryPath, bin); err != nil {
		return err
	}
	ca, err := readOptional(caPath)
	if err != nil {
		return fmt.Errorf("CA certificates: %w (-ca-certs \"\" leaves them out)", err)
	}
	s.layer, err = buildLayer(rootfs(bin, ca), s.created)
	return err
}

// descriptor points at a blob.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// runConfig is the part of the image config a container engine runs by.
type runConfig struct {
	User         string              `json:"User"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts"`
	Env          []string            `json:"Env"`
	Entrypoint   []string            `json:"Entrypoint"`
	Cmd          []string            `json:"Cmd"`
	WorkingDir   string              `json:"WorkingDir"`
	Labels       map[string]string   `json:"Labels"`
	StopSignal   string              `json:"StopSignal"`
}

type imageConfig struct {
	Created      string    `json:"created"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Config       runConfig `json:"config"`
	RootFS       struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []struct {
		Created   string `json:"created"`
		CreatedBy string `json:"created_by"`
	} `json:"history"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

// dockerManifest is one entry of a docker-archive's manifest.json.
type dockerManifest struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

// config is the image config: lockproxy as the nonroot user, as the
// Dockerfile's image runs it.
func (s *imageSpec) config() imageConfig {
	created := s.created.Format(time.RFC3339)
	c := imageConfig{Created: created, Architecture: s.arch, OS: "linux"}
	c.Config = runConfig{
		User:         fmt.Sprintf("%d:%d", nonrootUID, nonrootUID),
		ExposedPorts: map[string]struct{}{"3307/tcp": {}, "9307/tcp": {}},
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		Entrypoint:   []string{"/" + binaryPath},
		Cmd:          []string{"--config", "/etc/lockproxy/rules.yaml"},
		WorkingDir:   "/home/nonroot",
		Labels: map[string]string{
			"org.opencontainers.image.title":   "lockproxy",
			"org.opencontainers.image.version": s.version,
		},
		StopSignal: "SIGTERM",
	}
	c.RootFS.Type = "layers"
	c.RootFS.DiffIDs = []string{s.layer.diffID}
	c.History = append(c.History, struct {
		Created   string `json:"created"`
		CreatedBy string `json:"created_by"`
	}{created, "lockproxy internal/ociimage"})
	return c
}

// writeArchive writes the image as a tar that is both an OCI image
// layout and a docker-archive.
func (s *imageSpec) writeArchive(w io.Writer) error {
	cfg, err := json.Marshal(s.config())
	if err != nil {
		return err
	}
	cfgDesc := descriptor{MediaType: mediaConfig, Digest: sha256Digest(cfg), Size: len(cfg)}
	layerDesc := descriptor{MediaType: mediaLayer, Digest: s.layer.digest, Size: len(s.layer.gz)}
	man, err := json.Marshal(manifest{SchemaVersion: 2, MediaType: mediaManifest, Config: cfgDesc, Layers: []descriptor{layerDesc}})
	if err != nil {
		return err
	}
	manDesc := descriptor{
		MediaType: mediaManifest, Digest: sha256Digest(man), Size: len(man),
		Platform: &platform{Architecture: s.arch, OS: "linux"},
		Annotations: map[string]string{
			// podman and skopeo name the image by the first, containerd
			// and Docker by the second.
			"org.opencontainers.image.ref.name": s.tag,
			"io.containerd.image.name":          s.tag,
		},
	}
	idx, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []descriptor{manDesc}})
	if err != nil {
		return err
	}
	docker, err := json.Marshal([]dockerManifest{{
		Config: blobPath(cfgDesc.Digest), RepoTags: []string{s.tag}, Layers: []string{blobPath(layerDesc.Digest)},
	}})
	if err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", idx},
		{"manifest.json", docker},
		{blobPath(cfgDesc.Digest), cfg},
		{blobPath(layerDesc.Digest), s.layer.gz},
		{blobPath(manDesc.Digest), man},
	}
	tw := tar.NewWriter(w)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: s.created, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	for _, f := range files {
		h := &tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data)), ModTime: s.created, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// blobPath is where a blob lives in an OCI layout.
func blobPath(digest string) string {
	return "blobs/" + strings.Replace(digest, ":", "/", 1)
}
