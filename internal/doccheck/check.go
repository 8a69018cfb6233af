package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// problem is one doc comment that does not start with its name.
type problem struct {
	pos   token.Position
	names []string // the names it may start with
	first string   // what it starts with instead
}

func (p problem) String() string {
	return fmt.Sprintf("%s: doc comment of %s should start with %q, not %q",
		p.pos, strings.Join(p.names, ", "), p.names[0], p.first)
}

// checkTree checks every .go file under root.
func checkTree(root string, exportedOnly bool) ([]problem, error) {
	var out []problem
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || name == "vendor" || name == "third_party" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		out = append(out, checkFile(fset, f, exportedOnly)...)
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].pos, out[j].pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Line < b.Line
	})
	return out, err
}

// checkFile checks the top-level declarations of one file.
func checkFile(fset *token.FileSet, f *ast.File, exportedOnly bool) []problem {
	var out []problem
	check := func(doc *ast.CommentGroup, names []string) {
		if doc == nil {
			return
		}
		var keep []string
		for _, n := range names {
			if n != "_" && (!exportedOnly || ast.IsExported(n)) {
				keep = append(keep, n)
			}
		}
		if len(keep) == 0 {
			return
		}
		if first, ok := startsWithName(doc.Text(), keep); !ok {
			out = append(out, problem{pos: fset.Position(doc.Pos()), names: keep, first: first})
		}
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			check(d.Doc, []string{d.Name.Name})
		case *ast.GenDecl:
			if d.Tok == token.IMPORT {
				continue
			}
			for _, spec := range d.Specs {
				names, doc := specNames(spec)
				if doc == nil && !d.Lparen.IsValid() {
					doc = d.Doc // one declaration without parentheses
				}
				check(doc, names)
			}
		}
	}
	return out
}

// specNames returns the names a type, const or var spec declares and its
// own doc comment.
func specNames(spec ast.Spec) ([]string, *ast.CommentGroup) {
	switch s := spec.(type) {
	case *ast.TypeSpec:
		return []string{s.Name.Name}, s.Doc
	case *ast.ValueSpec:
		var names []string
		for _, n := range s.Names {
			names = append(names, n.Name)
		}
		return names, s.Doc
	}
	return nil, nil
}

// startsWithName reports whether text starts with one of names, optionally
// after an article, or is a deprecation notice. Otherwise it returns the
// word the text starts with.
func startsWithName(text string, names []string) (string, bool) {
	words := strings.Fields(text)
	if len(words) == 0 {
		return "", true // nothing but directives
	}
	if words[0] == "Deprecated:" {
		return "", true
	}
	cands := []string{words[0]}
	if len(words) > 1 && (words[0] == "A" || words[0] == "An" || words[0] == "The") {
		cands = append(cands, words[1])
	}
	for _, w := range cands {
		for _, n := range names {
			if trimName(w) == n {
				return "", true
			}
		}
	}
	return words[0], false
}

// trimName drops what may follow a name in prose: punctuation, and a
// possessive "'s" ("session's state").
func trimName(w string) string {
	w = strings.TrimSuffix(w, "'s")
	return strings.TrimRight(w, ".,:;")
}
