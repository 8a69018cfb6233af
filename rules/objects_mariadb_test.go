package rules

import (
	"context"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

// TestLoadSchemaObjects reads views, routines and triggers from MariaDB
// and checks what the rules make of them: MariaDB's own spelling of a
// view definition (qualified, back-quoted, with the column list as
// aliases) is a projection lockproxy can key through.
func TestLoadSchemaObjects(t *testing.T) {
	bed := testbed.Get(t)
	dbName := bed.TempDatabase(t)
	db := bed.Open(t, bed.PrimaryAddr, dbName)
	for _, q := range []string{
		"CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT)",
		"CREATE TABLE orders (id INT PRIMARY KEY, sku_id BIGINT)",
		"CREATE VIEW v_sku (k, q) AS SELECT sku_id, stock FROM sku WHERE stock > 0",
		"CREATE PROCEDURE p() UPDATE sku SET stock = 0",
		"CREATE FUNCTION f() RETURNS INT DETERMINISTIC RETURN 1",
		"CREATE TRIGGER trg BEFORE DELETE ON orders FOR EACH ROW DELETE FROM sku WHERE sku_id = OLD.sku_id",
	} {
		testbed.MustExec(t, db, q)
	}
	cfg := &Config{Rules: []Rule{{Name: "sku", Table: dbName + ".sku", Key: []string{"sku_id"}, Lock: []string{LockWrite}, OnUnkeyed: OnUnkeyedReject}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema, _, err := LoadSchema(ctx, db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	objs, ok := schema.Objects()
	if !ok {
		t.Fatal("LoadSchema did not read the objects")
	}
	found := map[string]bool{}
	for _, v := range objs.Views {
		found["view "+v.Schema+"."+v.Name] = v.Definition != ""
	}
	for _, r := range objs.Routines {
		found[map[bool]string{true: "function ", false: "procedure "}[r.Function]+r.Schema+"."+r.Name] = r.BodyKnown && r.Body != ""
	}
	for _, tr := range objs.Triggers {
		found["trigger "+tr.Schema+"."+tr.Name+" "+tr.Event+" "+tr.Table] = tr.Body != ""
	}
	for _, want := range []string{"view " + dbName + ".v_sku", "procedure " + dbName + ".p", "function " + dbName + ".f",
		"trigger " + dbName + ".trg DELETE orders"} {
		if !found[want] {
			t.Errorf("%s missing or without its body; found %v", want, found)
		}
	}
	rs, err := Compile(cfg, schema)
	if err != nil {
		t.Fatal(err)
	}
	v := rs.view(dbName, "v_sku")
	if v == nil || v.proj == nil || v.proj.Columns["k"] != "sku_id" || v.proj.Columns["q"] != "stock" || len(v.guards) != 1 {
		t.Fatalf("view plan %+v", v)
	}
	if n := rs.objects.procs[dbName+".p"]; n == nil || len(n.reaches) != 1 {
		t.Fatalf("procedure plan %+v", n)
	}
	if n := rs.objects.triggers[dbName+".orders"]; len(n) != 1 || len(n[0].reaches) != 1 {
		t.Fatalf("trigger plan %+v", n)
	}
	if n := rs.objects.funcs[dbName+".f"]; n == nil || len(n.reaches) != 0 {
		t.Fatalf("function plan %+v", n)
	}
}
