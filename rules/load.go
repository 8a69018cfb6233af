package rules

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Load reads, expands, defaults and validates the rules.yaml at path.
// Relative TLS file names are taken relative to the file's directory. On a
// bad file the error is a *ValidationError listing every problem with its
// line (errors.Is(err, ErrInvalidConfig)); an unreadable file gives the
// os error.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	cfg, err := load(path, data, os.LookupEnv, filepath.Dir(path))
	if cfg != nil {
		cfg.Path = path
	}
	return cfg, err
}

// LoadBytes is Load for a configuration already in memory; name is used in
// problem reports, relative TLS file names are taken relative to the
// working directory.
func LoadBytes(name string, data []byte) (*Config, error) {
	return load(name, data, os.LookupEnv, "")
}

// load does the work of Load with an injectable environment.
func load(name string, data []byte, env func(string) (string, bool), baseDir string) (*Config, error) {
	ps := &problems{file: name}
	d := &decoder{ps: ps, env: env, anchors: map[string]ast.Node{}, lines: map[string]int{}}
	cfg := &Config{}
	body, ok := parseYAML(ps, data)
	if !ok {
		return nil, ps.err()
	}
	if body != nil {
		ast.Walk(anchorCollector(d.anchors), body)
		d.decode(body, "", reflect.ValueOf(cfg).Elem())
	}
	cfg.lines = d.lines
	applyDefaults(cfg, d)
	resolveFiles(cfg, baseDir)
	validate(cfg, d, ps)
	if err := ps.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// parseYAML parses data into one document body (nil for an empty file).
func parseYAML(ps *problems, data []byte) (body ast.Node, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			ps.add(0, "", "yaml: cannot parse: %v", r)
			body, ok = nil, false
		}
	}()
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		var ye yaml.Error
		line := 0
		msg := err.Error()
		if errors.As(err, &ye) {
			msg = ye.GetMessage()
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				line = tk.Position.Line
			}
		}
		ps.add(line, "", "yaml: %s", msg)
		return nil, false
	}
	var docs []*ast.DocumentNode
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			docs = append(docs, doc)
		}
	}
	if len(docs) > 1 {
		ps.add(lineOf(docs[1].Body), "", "yaml: want one document, found %d", len(docs))
		return nil, false
	}
	if len(docs) == 0 {
		return nil, true
	}
	return docs[0].Body, true
}

type anchorCollector map[string]ast.Node

func (a anchorCollector) Visit(n ast.Node) ast.Visitor {
	if an, ok := n.(*ast.AnchorNode); ok && an.Name != nil {
		a[an.Name.GetToken().Value] = an.Value
	}
	return a
}

// resolveFiles makes relative TLS paths relative to baseDir.
func resolveFiles(cfg *Config, baseDir string) {
	t := cfg.Proxy.TLS
	if t == nil || baseDir == "" {
		return
	}
	for _, p := range []*string{&t.Cert, &t.Key} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(baseDir, *p)
		}
	}
}
