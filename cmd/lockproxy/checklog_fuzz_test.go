package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockproxy/lockproxy/proxy"
	"github.com/lockproxy/lockproxy/rules"
)

// FuzzCheckLog feeds arbitrary bytes to lockproxy check's log readers: a
// log file is input lockproxy does not control, so any bytes must give an
// answer (decisions or an error), never a panic or a hang.
func FuzzCheckLog(f *testing.F) {
	for _, name := range []string{"general.log", "slow.log"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("\t\t 1 Query\tSELECT 1\n# Thread_id: x\n"))
	cfg, err := rules.Load(filepath.Join("testdata", "check.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	rs, err := rules.Compile(cfg, rules.Schema{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, log []byte) {
		for _, read := range []func(*bufio.Reader, *proxy.Workload) error{
			func(r *bufio.Reader, w *proxy.Workload) error { return readGeneralLog(r, w) },
			func(r *bufio.Reader, w *proxy.Workload) error { return readSlowLog(r, w) },
		} {
			w := proxy.NewWorkload(rs, false)
			br := bufio.NewReader(bytes.NewReader(log))
			_ = isSlowLog(br)
			if err := read(br, w); err != nil {
				continue
			}
			var out bytes.Buffer
			w.Print(&out)
			if out.Len() == 0 {
				t.Fatal("check printed nothing")
			}
		}
	})
}
