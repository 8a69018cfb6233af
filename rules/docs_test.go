package rules

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

const configDoc = "../docs/configuration.md"

// yamlPaths lists the key path of every yaml tag reachable from t, as
// docs/configuration.md writes them: "proxy.tls.cert", "users[].user".
func yamlPaths(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		if t.Kind() == reflect.Slice {
			prefix += "[]"
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		p := name
		if prefix != "" {
			p = prefix + "." + name
		}
		out = append(out, p)
		out = append(out, yamlPaths(f.Type, p)...)
	}
	return out
}

// TestConfigurationDocCoversEveryKey fails when a key of rules.yaml (a yaml
// tag of Config or of any struct under it) is not documented, by its full
// path in backquotes, in docs/configuration.md.
func TestConfigurationDocCoversEveryKey(t *testing.T) {
	doc, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	paths := yamlPaths(reflect.TypeOf(Config{}), "")
	if len(paths) < 40 {
		t.Fatalf("found only %d keys: %v", len(paths), paths)
	}
	for _, p := range paths {
		if !bytes.Contains(doc, []byte("`"+p+"`")) {
			t.Errorf("docs/configuration.md does not document `%s`", p)
		}
	}
}

// TestConfigurationDocExamplesLoad loads every ```yaml block of
// docs/configuration.md that starts with "# example: NAME", so the examples
// stay valid configurations, and checks there is one for each lock backend.
func TestConfigurationDocExamplesLoad(t *testing.T) {
	doc, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) {
		if k == "APP_DB_PASSWORD" || k == "LOCKPROXY_DB_PASSWORD" {
			return "pw", true
		}
		return "", false
	}
	examples := yamlExamples(t, doc)
	backends := map[string]bool{}
	for name, body := range examples {
		t.Run(name, func(t *testing.T) {
			cfg, err := load(name+".yaml", body, env, "")
			if err != nil {
				t.Fatal(err)
			}
			backends[cfg.Locks.Backend] = true
		})
	}
	for _, b := range LockBackends {
		if !backends[b] {
			t.Errorf("no example for locks.backend: %s", b)
		}
	}
	for _, want := range []string{"redis-sentinel", "redis-cluster", "redlock"} {
		if examples[want] == nil {
			t.Errorf("no example %q", want)
		}
	}
}

var exampleRe = regexp.MustCompile(`^# example: (\S+)$`)

func yamlExamples(t *testing.T, doc []byte) map[string][]byte {
	out := map[string][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(doc))
	var name string
	var body []byte
	in := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "```yaml":
			in, name, body = true, "", nil
		case in && line == "```":
			in = false
			if name != "" {
				if out[name] != nil {
					t.Errorf("two examples named %q", name)
				}
				out[name] = body
			}
		case in:
			if m := exampleRe.FindStringSubmatch(line); m != nil && body == nil {
				name = m[1]
			}
			body = append(body, line+"\n"...)
		}
	}
	return out
}

// TestNoPointersOutsideRepository fails when a file of the repository
// refers readers to documents that are not in it: everything a reader
// needs is under docs/ and the package comments. It reads the files git
// would commit (tracked, or new and not ignored), so build outputs such as
// test binaries do not count; without git it reads the whole tree.
func TestNoPointersOutsideRepository(t *testing.T) {
	banned := []string{"../" + "shared", "DESIGN" + ".md", "/work" + "/main/"}
	for _, path := range repositoryFiles(t) {
		data, err := os.ReadFile(filepath.Join("..", path))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree, not yet committed
			}
			t.Fatal(err)
		}
		for _, b := range banned {
			if bytes.Contains(data, []byte(b)) {
				t.Errorf("%s mentions %s", path, b)
			}
		}
	}
}

// repositoryFiles lists the repository's files relative to its root.
func repositoryFiles(t *testing.T) []string {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = ".."
	if out, err := cmd.Output(); err == nil {
		return strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	}
	var files []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".testbed", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel("..", path)
		files = append(files, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestDocsNameExistingFiles fails when docs/architecture.md or
// docs/configuration.md names a Go file or a package directory (in
// backquotes) that is not in the repository, so the map stays true as code
// moves.
func TestDocsNameExistingFiles(t *testing.T) {
	ref := regexp.MustCompile("`((?:cmd|proxy|rules|parser|lockmgr|router|internal|bench|e2e|docs)(?:/[A-Za-z0-9_.-]+)*)`")
	for _, doc := range []string{"../docs/architecture.md", configDoc} {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ref.FindAllStringSubmatch(string(data), -1) {
			p := m[1]
			if strings.Contains(p, "...") || !strings.Contains(p, "/") && !strings.HasSuffix(p, ".go") {
				continue
			}
			if _, err := os.Stat(filepath.Join("..", p)); err != nil {
				t.Errorf("%s names %s, which does not exist", doc, p)
			}
		}
	}
}
