package rules

import (
	"strings"
	"testing"
)

// TestLockBackendsValidate checks that validation knows every name of
// LockBackends (a name it does not know is reported as an unknown backend)
// and still refuses a name that is not there.
func TestLockBackendsValidate(t *testing.T) {
	blocks := map[string]string{
		LockBackendRedis:     "  redis:\n    addrs: [127.0.0.1:6379]\n",
		LockBackendMemory:    "",
		LockBackendMySQL:     "  mysql: {table: lockproxy_locks}\n",
		LockBackendEtcd:      "  etcd:\n    endpoints: [127.0.0.1:2379]\n",
		LockBackendZooKeeper: "  zookeeper:\n    servers: [127.0.0.1:2181]\n",
	}
	if len(blocks) != len(LockBackends) {
		t.Fatalf("LockBackends has %d names, this test knows %d", len(LockBackends), len(blocks))
	}
	for _, name := range append(LockBackends, "consul") {
		t.Run(name, func(t *testing.T) {
			body := "users: [{user: app}]\nbackends: {primary: 127.0.0.1:3306}\nlocks:\n  backend: " + name + "\n" + blocks[name]
			_, err := load("backend.yaml", []byte(body), testEnv, "")
			unknown := err != nil && strings.Contains(err.Error(), "unknown backend")
			if want := name == "consul"; unknown != want {
				t.Fatalf("unknown backend reported: %v, want %v (err: %v)", unknown, want, err)
			}
			if name != "consul" && err != nil {
				t.Fatal(err)
			}
		})
	}
}
