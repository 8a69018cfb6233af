package rules

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// maxNodes bounds how many YAML nodes one load may visit, so a file of
// nested aliases (a "billion laughs") cannot exhaust memory.
const maxNodes = 100000

// decoder turns a goccy/go-yaml AST into the Config structs. Unlike
// yaml.Unmarshal it does not stop at the first mistake: it reports every
// unknown key, wrong type and bad value it meets, each with its line and key
// path, and records where every key was set so that validation can point at
// lines too. ${VAR} references expand inside each scalar after parsing, so a
// value with YAML metacharacters (a password with '#' or ': ') stays whole
// and a reference in a comment is never expanded.
type decoder struct {
	ps      *problems
	env     func(string) (string, bool)
	anchors map[string]ast.Node
	lines   map[string]int // key path → line where it is set
	visited int
	tooBig  bool
}

// budget counts one more node and reports false (once, as a problem) when
// the document has used up maxNodes.
func (d *decoder) budget(n ast.Node, path string) bool {
	d.visited++
	if d.visited <= maxNodes {
		return true
	}
	if !d.tooBig {
		d.tooBig = true
		d.ps.add(lineOf(n), path, "document too large or too deeply aliased (more than %d nodes)", maxNodes)
	}
	return false
}

var (
	durationType = reflect.TypeOf(Duration(0))
	sizeType     = reflect.TypeOf(Size(0))
)

// line returns the line where path (or its nearest set ancestor) was set.
func (d *decoder) line(path string) int {
	for path != "" {
		if l, ok := d.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// isSet reports whether the file gave path a value.
func (d *decoder) isSet(path string) bool {
	_, ok := d.lines[path]
	return ok
}

func lineOf(n ast.Node) int {
	if n == nil {
		return 0
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

// resolve strips tags and anchors and follows aliases.
func (d *decoder) resolve(n ast.Node) ast.Node {
	for i := 0; i < 64 && n != nil; i++ {
		switch v := n.(type) {
		case *ast.TagNode:
			n = v.Value
		case *ast.AnchorNode:
			n = v.Value
		case *ast.AliasNode:
			name := ""
			if v.Value != nil {
				name = v.Value.GetToken().Value
			}
			n = d.anchors[name]
			if n == nil {
				return nil
			}
		default:
			return n
		}
	}
	return n
}

// decode stores node n into v (addressable), reporting problems at path.
func (d *decoder) decode(n ast.Node, path string, v reflect.Value) {
	if !d.budget(n, path) {
		return
	}
	line := lineOf(n)
	n = d.resolve(n)
	if n == nil {
		d.ps.add(line, path, "unknown alias")
		return
	}
	if _, null := n.(*ast.NullNode); null {
		return // an empty value keeps the default
	}
	switch {
	case v.Type() == durationType:
		d.decodeDuration(n, path, v)
	case v.Type() == sizeType:
		d.decodeSize(n, path, v)
	case v.Kind() == reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		d.decode(n, path, elem.Elem())
		v.Set(elem)
	case v.Kind() == reflect.Struct:
		d.decodeStruct(n, path, v)
	case v.Kind() == reflect.Slice:
		d.decodeSlice(n, path, v)
	default:
		d.decodeScalar(n, path, v)
	}
}

func (d *decoder) decodeStruct(n ast.Node, path string, v reflect.Value) {
	entries, ok := d.mappingEntries(n)
	if !ok {
		d.ps.add(lineOf(n), path, "must be a mapping (key: value), not %s", describe(n))
		return
	}
	fields := yamlFields(v.Type())
	seen := map[string]int{}
	for _, e := range entries {
		key := d.resolve(e.Key)
		name := ""
		if key != nil {
			name = scalarText(key)
		}
		kpath := join(path, name)
		kline := lineOf(e.Key)
		if prev, dup := seen[name]; dup {
			d.ps.add(kline, kpath, "duplicate key (first set on line %d)", prev)
			continue
		}
		seen[name] = kline
		idx, known := fields[name]
		if !known {
			d.ps.add(kline, kpath, "unknown key %q (known keys: %s)", name, knownKeys(fields))
			continue
		}
		d.lines[kpath] = kline
		if cfg, ok := v.Addr().Interface().(*Config); ok && name == "users" && d.decodeUsersMapping(e.Value, cfg) {
			continue
		}
		d.decode(e.Value, kpath, v.Field(idx))
	}
}

// decodeUsersMapping decodes users: written as a mapping —
// {from_backend: true, list: [...]} — into cfg, and reports whether it
// was one (a list, or a mapping with neither key, is decoded as any
// other). The entries of list keep the
// paths of the list form (users[0].user), so problems read the same.
func (d *decoder) decodeUsersMapping(n ast.Node, cfg *Config) bool {
	if !d.budget(n, "users") {
		return true
	}
	entries, ok := d.mappingEntries(d.resolve(n))
	known := map[string]int{"from_backend": 0, "list": 1}
	if !ok || !slices.ContainsFunc(entries, func(e *ast.MappingValueNode) bool {
		_, k := known[scalarText(d.resolve(e.Key))]
		return k
	}) {
		return false // not this form: "must be a list"
	}
	seen := map[string]int{}
	for _, e := range entries {
		name := scalarText(d.resolve(e.Key))
		kpath, kline := join("users", name), lineOf(e.Key)
		if prev, dup := seen[name]; dup {
			d.ps.add(kline, kpath, "duplicate key (first set on line %d)", prev)
			continue
		}
		seen[name] = kline
		switch name {
		case "from_backend":
			d.lines[kpath] = kline
			d.decode(e.Value, kpath, reflect.ValueOf(&cfg.UsersFromBackend).Elem())
		case "list":
			d.lines[kpath] = kline
			d.decode(e.Value, "users", reflect.ValueOf(&cfg.Users).Elem())
		default:
			d.ps.add(kline, kpath, "unknown key %q (known keys: %s)", name, knownKeys(known))
		}
	}
	return true
}

// mappingEntries lists a mapping's key/value pairs, with merge keys (<<)
// expanded; explicit keys win over merged ones.
func (d *decoder) mappingEntries(n ast.Node) ([]*ast.MappingValueNode, bool) {
	var raw []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		raw = m.Values
	case *ast.MappingValueNode:
		raw = []*ast.MappingValueNode{m}
	default:
		return nil, false
	}
	var out, merged []*ast.MappingValueNode
	for _, e := range raw {
		if e.Key != nil && e.Key.IsMergeKey() {
			merged = append(merged, d.mergeSources(e.Value)...)
			continue
		}
		out = append(out, e)
	}
	for _, e := range merged {
		if !hasKey(out, d, scalarText(d.resolve(e.Key))) {
			out = append(out, e)
		}
	}
	return out, true
}

// mergeSources returns the entries a merge key (<<: *a or <<: [*a, *b])
// brings in, earlier sources first (they win, as YAML says).
func (d *decoder) mergeSources(v ast.Node) []*ast.MappingValueNode {
	if !d.budget(v, "") {
		return nil
	}
	src := d.resolve(v)
	if src == nil {
		return nil
	}
	if seq, ok := src.(*ast.SequenceNode); ok {
		var out []*ast.MappingValueNode
		for _, item := range seq.Values {
			out = append(out, d.mergeSources(item)...)
		}
		return out
	}
	inner, _ := d.mappingEntries(src)
	return inner
}

func hasKey(list []*ast.MappingValueNode, d *decoder, name string) bool {
	for _, e := range list {
		if scalarText(d.resolve(e.Key)) == name {
			return true
		}
	}
	return false
}

func (d *decoder) decodeSlice(n ast.Node, path string, v reflect.Value) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		if v.Type().Elem().Kind() == reflect.String && isScalar(n) {
			// A lone scalar where a list of strings goes: key: sku_id.
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			d.decodeScalar(n, path+"[0]", v.Index(0))
			return
		}
		d.ps.add(lineOf(n), path, "must be a list, not %s", describe(n))
		return
	}
	out := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
	for i, item := range seq.Values {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		d.lines[ipath] = lineOf(item)
		d.decode(item, ipath, out.Index(i))
	}
	v.Set(out)
}

func (d *decoder) decodeScalar(n ast.Node, path string, v reflect.Value) {
	if !isScalar(n) {
		hint := ""
		if v.Kind() == reflect.String && (n.Type() == ast.MappingType || n.Type() == ast.MappingValueType) {
			// Inside {...} the YAML parser reads host:port as key: value.
			hint = " (quote a host:port written inside {...}: \"127.0.0.1:6379\")"
		}
		d.ps.add(lineOf(n), path, "must be a %s, not %s%s", kindName(v.Kind()), describe(n), hint)
		return
	}
	text, ok := d.expand(n, path)
	if !ok {
		return
	}
	line := lineOf(n)
	switch v.Kind() {
	case reflect.String:
		v.SetString(text)
	case reflect.Int:
		i, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil || i > math.MaxInt32 || i < math.MinInt32 {
			d.ps.add(line, path, "must be an integer, not %q", text)
			return
		}
		v.SetInt(i)
	case reflect.Bool:
		b, err := parseBool(text)
		if err != nil {
			d.ps.add(line, path, "must be true or false, not %q", text)
			return
		}
		v.SetBool(b)
	case reflect.Float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.ps.add(line, path, "must be a number, not %q", text)
			return
		}
		v.SetFloat(f)
	default:
		d.ps.add(line, path, "unsupported field kind %s", v.Kind())
	}
}

func (d *decoder) decodeDuration(n ast.Node, path string, v reflect.Value) {
	d.decodeInt(n, path, v, "a duration such as 2s or 150ms", func(text string) (int64, error) {
		dur, err := ParseDuration(text)
		return int64(dur), err
	})
}

func (d *decoder) decodeSize(n ast.Node, path string, v reflect.Value) {
	d.decodeInt(n, path, v, "a size such as 67108864 or 64MiB", func(text string) (int64, error) {
		size, err := ParseSize(text)
		return int64(size), err
	})
}

// decodeInt stores into v the scalar n (what it must be: want), with
// ${VAR} references expanded, as parse reads it.
func (d *decoder) decodeInt(n ast.Node, path string, v reflect.Value, want string, parse func(string) (int64, error)) {
	if !isScalar(n) {
		d.ps.add(lineOf(n), path, "must be %s, not %s", want, describe(n))
		return
	}
	text, ok := d.expand(n, path)
	if !ok {
		return
	}
	x, err := parse(text)
	if err != nil {
		d.ps.add(lineOf(n), path, "%v", err)
		return
	}
	v.SetInt(x)
}

// expand returns the scalar's text with ${VAR} references expanded.
func (d *decoder) expand(n ast.Node, path string) (string, bool) {
	out, err := expandEnv(scalarText(n), d.env)
	if err != nil {
		d.ps.add(lineOf(n), path, "%v", err)
		return "", false
	}
	return out, true
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "yes", "on":
		return true, nil
	case "false", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean")
}

func isScalar(n ast.Node) bool {
	switch n.(type) {
	case *ast.StringNode, *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode,
		*ast.LiteralNode, *ast.InfinityNode, *ast.NanNode:
		return true
	}
	return false
}

// scalarText is the text of a scalar as the user wrote it (unquoted).
func scalarText(n ast.Node) string {
	switch s := n.(type) {
	case *ast.StringNode:
		return s.Value
	case *ast.LiteralNode:
		if s.Value != nil {
			return s.Value.Value
		}
		return ""
	case nil:
		return ""
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Value
	}
	return ""
}

func describe(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("%q", scalarText(n))
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.Int:
		return "integer"
	case reflect.Bool:
		return "boolean"
	case reflect.Float64:
		return "number"
	}
	return "string"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlFields maps yaml tag names to field indexes ("-" fields excluded).
func yamlFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		out[tag] = i
	}
	return out
}

func knownKeys(fields map[string]int) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
