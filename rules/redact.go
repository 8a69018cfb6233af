package rules

import (
	"fmt"

	"github.com/goccy/go-yaml"
)

const redacted = "<redacted>"

// Redacted returns a deep copy of c with every password replaced by
// "<redacted>" (empty passwords stay empty), fit for logs and
// `lockproxy --check` output.
func (c *Config) Redacted() *Config {
	if c == nil {
		return nil
	}
	out := *c
	out.Users = make([]User, len(c.Users))
	for i, u := range c.Users {
		out.Users[i] = User{User: u.User, Password: hide(u.Password), FromBackend: u.FromBackend, MaxConnections: u.MaxConnections}
	}
	if out.Admin.Token != "" {
		out.Admin.Token = hide(out.Admin.Token)
	}
	if c.Locks.Redis != nil {
		r := *c.Locks.Redis
		r.Password = hide(r.Password)
		out.Locks.Redis = &r
	}
	return &out
}

func hide(s string) string {
	if s == "" {
		return ""
	}
	return redacted
}

// String renders the configuration as YAML with passwords redacted, so a
// Config printed with %v or logged never leaks a secret.
func (c *Config) String() string {
	if c == nil {
		return "<nil>"
	}
	b, err := yaml.Marshal(c.Redacted())
	if err == nil && c.UsersFromBackend {
		b, err = usersFromBackend(b)
	}
	if err != nil {
		return fmt.Sprintf("rules: cannot render config: %v", err)
	}
	return string(b)
}

// usersFromBackend rewrites the rendered users list into the mapping form
// users.from_backend is written in, which the Config struct keeps as a
// separate field, so the rendering shows the setting and loads back the same.
func usersFromBackend(b []byte) ([]byte, error) {
	var m yaml.MapSlice
	if err := yaml.UnmarshalWithOptions(b, &m, yaml.UseOrderedMap()); err != nil {
		return nil, err
	}
	for i, it := range m {
		if it.Key == "users" {
			m[i].Value = yaml.MapSlice{{Key: "from_backend", Value: true}, {Key: "list", Value: it.Value}}
		}
	}
	return yaml.Marshal(m)
}

// String hides the password: a User printed with %v never leaks it.
func (u User) String() string {
	return fmt.Sprintf("{user:%s password:%s}", u.User, hide(u.Password))
}

// GoString hides the password from %#v as well.
func (u User) GoString() string { return u.String() }

// String hides the password: a RedisConfig printed with %v never leaks it.
func (r RedisConfig) String() string {
	return fmt.Sprintf("{addrs:%v master_name:%s cluster:%v mode:%s username:%s password:%s db:%d}",
		r.Addrs, r.MasterName, r.Cluster, r.Mode, r.Username, hide(r.Password), r.DB)
}
