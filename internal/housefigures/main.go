// Command housefigures prints the figures docs/architecture.md keeps of
// the proxy package's shape: the session type's fields and methods, the
// files over the line bound, and where the statement pipeline's stages
// are called from.
//
//	go run ./internal/housefigures [dir]   (default: proxy)
package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// maxLines is the bound on a file of the package (tests excepted).
const maxLines = 500

// stages are the pipeline's calls that only the pipeline file may make.
var stages = []string{"planRewrite", "planFence", "finishRewrite"}

func main() {
	dir := "proxy"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := run(dir); err != nil {
		fmt.Fprintln(os.Stderr, "housefigures:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return err
	}
	fields, methods := 0, 0
	type long struct {
		name  string
		lines int
	}
	var longs []long
	callers := map[string]map[string]bool{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return err
		}
		if n, err := countLines(name); err != nil {
			return err
		} else if n > maxLines {
			longs = append(longs, long{filepath.Base(name), n})
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					if ts, ok := sp.(*ast.TypeSpec); ok && ts.Name.Name == "session" {
						if st, ok := ts.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								fields += max(len(fl.Names), 1)
							}
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && recvName(d.Recv) == "session" {
					methods++
				}
				if d.Body == nil {
					continue
				}
				ast.Inspect(d.Body, func(n ast.Node) bool {
					if c, ok := n.(*ast.CallExpr); ok {
						if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
							for _, st := range stages {
								if sel.Sel.Name == st {
									if callers[st] == nil {
										callers[st] = map[string]bool{}
									}
									callers[st][filepath.Base(name)] = true
								}
							}
						}
					}
					return true
				})
			}
		}
	}
	fmt.Printf("session: %d fields, %d methods\n", fields, methods)
	sort.Slice(longs, func(i, j int) bool { return longs[i].lines > longs[j].lines })
	fmt.Printf("files over %d lines: %d\n", maxLines, len(longs))
	for _, l := range longs {
		fmt.Printf("  %s %d\n", l.name, l.lines)
	}
	for _, st := range stages {
		var files []string
		for f := range callers[st] {
			files = append(files, f)
		}
		sort.Strings(files)
		fmt.Printf("%s called from: %s\n", st, strings.Join(files, ", "))
	}
	return nil
}

func recvName(fl *ast.FieldList) string {
	if len(fl.List) == 0 {
		return ""
	}
	t := fl.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func countLines(name string) (int, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}
