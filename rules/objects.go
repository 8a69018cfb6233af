package rules

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// View is a view on the primary, as information_schema.VIEWS shows it.
// Names are lowercased.
type View struct {
	Schema, Name string
	// Definition is the view's SELECT (VIEW_DEFINITION); "" when the
	// backend user may not see it.
	Definition string
}

// Routine is a stored procedure or function, as information_schema.ROUTINES
// shows it. Names are lowercased.
type Routine struct {
	Schema, Name string
	// Function is true for a FUNCTION, false for a PROCEDURE.
	Function bool
	// Body is ROUTINE_DEFINITION. BodyKnown is false when the server did
	// not show it (NULL: the backend user lacks the privilege to see
	// another user's routine): lockproxy then assumes the routine may
	// write any guarded table.
	Body      string
	BodyKnown bool
}

// Trigger is a trigger, as information_schema.TRIGGERS shows it. Names are
// lowercased.
type Trigger struct {
	Schema, Name string
	// Table is the table the trigger is on (EVENT_OBJECT_TABLE), in Schema.
	Table string
	// Event is INSERT, UPDATE or DELETE (EVENT_MANIPULATION).
	Event string
	// Body is ACTION_STATEMENT.
	Body string
	// Before is true for a BEFORE trigger (ACTION_TIMING), which may set
	// the NEW row's columns.
	Before bool
	// ForeignKey is true for a foreign key whose ON DELETE or ON UPDATE
	// (Event) is CASCADE, SET NULL or SET DEFAULT: a write to the parent
	// Table then writes the child table too, as a trigger would. Name is
	// the constraint's, and Body names the child table.
	ForeignKey bool
}

// Objects are the views, stored routines and triggers of the primary:
// what a statement can reach besides the tables it names.
type Objects struct {
	Views    []View
	Routines []Routine
	Triggers []Trigger
}

// WithObjects returns a copy of s that knows objs. A Schema without
// objects (the zero Schema, NewSchema) knows no view, routine or trigger,
// and then a CALL of a procedure, whose body lockproxy cannot see, is
// refused by every rule that locks writes.
func (s Schema) WithObjects(objs Objects) Schema {
	s.objects = &objs
	return s
}

// Objects returns the views, routines and triggers s knows; ok is false
// when they were never read.
func (s Schema) Objects() (objs Objects, ok bool) {
	if s.objects == nil {
		return Objects{}, false
	}
	return *s.objects, true
}

const viewsQuery = `SELECT TABLE_SCHEMA, TABLE_NAME, IFNULL(VIEW_DEFINITION, '')
FROM information_schema.VIEWS
WHERE TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')`

const routinesQuery = `SELECT ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_TYPE, ROUTINE_DEFINITION
FROM information_schema.ROUTINES`

const triggersQuery = `SELECT TRIGGER_SCHEMA, TRIGGER_NAME, EVENT_OBJECT_TABLE, EVENT_MANIPULATION, ACTION_STATEMENT, ACTION_TIMING
FROM information_schema.TRIGGERS`

// foreignKeysQuery lists the foreign keys whose actions write the child
// table: one row per action (ON DELETE, ON UPDATE).
const foreignKeysQuery = `SELECT UNIQUE_CONSTRAINT_SCHEMA, REFERENCED_TABLE_NAME, CONSTRAINT_SCHEMA, CONSTRAINT_NAME, TABLE_NAME, 'DELETE'
FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE DELETE_RULE IN ('CASCADE', 'SET NULL', 'SET DEFAULT')
UNION ALL
SELECT UNIQUE_CONSTRAINT_SCHEMA, REFERENCED_TABLE_NAME, CONSTRAINT_SCHEMA, CONSTRAINT_NAME, TABLE_NAME, 'UPDATE'
FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE UPDATE_RULE IN ('CASCADE', 'SET NULL', 'SET DEFAULT')`

// loadObjects reads every view, stored routine and trigger the backend
// user may see on the primary.
func loadObjects(ctx context.Context, db *sql.DB) (Objects, error) {
	var objs Objects
	err := scanRows(ctx, db, viewsQuery, "views", func(rows *sql.Rows) error {
		var v View
		if err := rows.Scan(&v.Schema, &v.Name, &v.Definition); err != nil {
			return err
		}
		v.Schema, v.Name = strings.ToLower(v.Schema), strings.ToLower(v.Name)
		objs.Views = append(objs.Views, v)
		return nil
	})
	if err != nil {
		return Objects{}, err
	}
	err = scanRows(ctx, db, routinesQuery, "routines", func(rows *sql.Rows) error {
		var r Routine
		var typ string
		var body sql.NullString
		if err := rows.Scan(&r.Schema, &r.Name, &typ, &body); err != nil {
			return err
		}
		r.Schema, r.Name = strings.ToLower(r.Schema), strings.ToLower(r.Name)
		r.Function = strings.EqualFold(typ, "FUNCTION")
		r.Body, r.BodyKnown = body.String, body.Valid
		objs.Routines = append(objs.Routines, r)
		return nil
	})
	if err != nil {
		return Objects{}, err
	}
	err = scanRows(ctx, db, triggersQuery, "triggers", func(rows *sql.Rows) error {
		var t Trigger
		var timing string
		if err := rows.Scan(&t.Schema, &t.Name, &t.Table, &t.Event, &t.Body, &timing); err != nil {
			return err
		}
		t.Before = strings.EqualFold(timing, "BEFORE")
		t.Schema, t.Name, t.Table = strings.ToLower(t.Schema), strings.ToLower(t.Name), strings.ToLower(t.Table)
		t.Event = strings.ToUpper(t.Event)
		objs.Triggers = append(objs.Triggers, t)
		return nil
	})
	if err != nil {
		return Objects{}, err
	}
	err = scanRows(ctx, db, foreignKeysQuery, "foreign keys", func(rows *sql.Rows) error {
		var parentSchema, parent, schema, name, child, event string
		if err := rows.Scan(&parentSchema, &parent, &schema, &name, &child, &event); err != nil {
			return err
		}
		objs.Triggers = append(objs.Triggers, Trigger{ForeignKey: true, Event: event,
			Schema: strings.ToLower(parentSchema), Table: strings.ToLower(parent),
			Name: strings.ToLower(name),
			Body: "UPDATE " + quoteIdent(strings.ToLower(schema)) + "." + quoteIdent(strings.ToLower(child))})
		return nil
	})
	if err != nil {
		return Objects{}, err
	}
	return objs, nil
}

// quoteIdent back-quotes an identifier.
func quoteIdent(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}

// scanRows runs query and hands each row to scan.
func scanRows(ctx context.Context, db *sql.DB, query, what string, scan func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("rules: read %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("rules: read %s: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("rules: read %s: %w", what, err)
	}
	return nil
}
