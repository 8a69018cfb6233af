package rules

import (
	"strings"

	"github.com/lockproxy/lockproxy/parser"
)

// UnrewrittenWrite is a rule with rewrite.on_unpaired: reject whose guarded
// column a statement writes in a form no rewrite makes conditional, and
// how it does ("REPLACE", "an UPDATE through view shop.v", ...).
type UnrewrittenWrite struct {
	Rule *Rule
	How  string
}

// UnrewrittenWrites lists the rules with rewrite.on_unpaired: reject whose
// guarded column f may set to a value that is not computed from the row's
// own current one (anything but `c = c + delta` / `c = c - delta`): an
// UPDATE's assignment, INSERT ... ON DUPLICATE KEY UPDATE's, REPLACE and
// LOAD DATA (which may replace a row whole), on the guarded table or
// through a view of it. A view that is not a plain projection counts every
// such assignment, whatever column it names. Only a single-row UPDATE of
// the table itself can be rewritten (Decision.RewriteTarget); callers let that one
// through to the rewrite, which refuses it when nothing is paired.
func (rs *RuleSet) UnrewrittenWrites(f *parser.Facts, currentDB string) []UnrewrittenWrite {
	if rs == nil || f == nil || !rs.rejectsUnpaired {
		return nil
	}
	var out []UnrewrittenWrite
	add := func(r *Rule, how string) {
		for _, w := range out {
			if w.Rule == r {
				return
			}
		}
		out = append(out, UnrewrittenWrite{Rule: r, How: how})
	}
	for _, ref := range f.Tables {
		if !ref.Write {
			continue
		}
		schema := refSchema(ref, currentDB)
		if v := rs.view(schema, ref.Name); v != nil {
			for _, g := range v.guards {
				if r := g.cr.rule; rejectsUnpaired(r) {
					var names map[string]bool
					if v.proj != nil {
						names = map[string]bool{}
						for vc, bc := range v.proj.Columns {
							if bc == strings.ToLower(r.Rewrite.Column) {
								names[vc] = true
							}
						}
					}
					if how := absoluteWrite(f, ref, names); how != "" {
						add(r, how+" through view "+v.name)
					}
				}
			}
			continue
		}
		for _, cr := range rs.rulesFor(schema, ref.Name) {
			if r := cr.rule; rejectsUnpaired(r) {
				if how := absoluteWrite(f, ref, map[string]bool{strings.ToLower(r.Rewrite.Column): true}); how != "" {
					add(r, how)
				}
			}
		}
	}
	return out
}

func rejectsUnpaired(r *Rule) bool {
	return r.Rewrite != nil && r.Rewrite.OnUnpaired == OnUnpairedReject
}

// absoluteWrite says how f writes one of names (nil: any column) of the
// table ref names other than relatively, or "" when it does not.
func absoluteWrite(f *parser.Facts, ref parser.TableRef, names map[string]bool) string {
	assigns := func(as []parser.Assignment) bool {
		for _, a := range as {
			if a.Table != "" && a.Table != ref.Alias && a.Table != ref.Name {
				continue
			}
			if (names == nil || names[a.Column]) && a.Kind != parser.AssignRelative {
				return true
			}
		}
		return false
	}
	switch f.Kind {
	case parser.KindReplace:
		return "REPLACE"
	case parser.KindLoadData:
		return "LOAD DATA"
	case parser.KindUpdate:
		if assigns(f.Assignments) {
			return "an UPDATE"
		}
	case parser.KindInsert:
		if f.Insert != nil && assigns(f.Insert.OnDuplicate) {
			return "INSERT ... ON DUPLICATE KEY UPDATE"
		}
	}
	return ""
}
