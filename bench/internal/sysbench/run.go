package sysbench

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"
)

// Workload is one sysbench invocation's settings.
type Workload struct {
	Test      string // oltp_point_select, oltp_read_write, ...
	Host      string
	Port      int
	User      string
	Password  string
	DB        string
	Tables    int
	TableSize int
	Threads   int
	Seconds   int
	PSMode    string // disable | auto
}

func (w Workload) args(action string) []string {
	a := []string{
		w.Test, "--db-driver=mysql",
		"--mysql-host=" + w.Host, "--mysql-port=" + strconv.Itoa(w.Port),
		"--mysql-user=" + w.User, "--mysql-password=" + w.Password, "--mysql-db=" + w.DB,
		"--tables=" + strconv.Itoa(w.Tables), "--table-size=" + strconv.Itoa(w.TableSize),
	}
	if action != "run" {
		return append(a, action)
	}
	return append(a,
		"--threads="+strconv.Itoa(w.Threads), "--time="+strconv.Itoa(w.Seconds),
		"--db-ps-mode="+w.PSMode, "--percentile=99", "--histogram=on",
		"--rand-type=uniform", "--report-interval=0", "run")
}

// Run runs the workload and parses its report. ctx bounds the run; a run
// also gets Seconds+60 s at most.
func Run(ctx context.Context, w Workload) (Stats, error) {
	out, cpu, err := invoke(ctx, w, "run", time.Duration(w.Seconds+60)*time.Second)
	if err != nil {
		return Stats{}, err
	}
	s, err := Parse(out)
	if err != nil {
		return s, fmt.Errorf("%w\n%s", err, out)
	}
	s.ClientCPUSec = cpu.Seconds()
	return s, nil
}

// Prepare drops the workload's tables if present and creates and fills them.
func Prepare(ctx context.Context, w Workload) error {
	if _, _, err := invoke(ctx, w, "cleanup", 2*time.Minute); err != nil {
		return err
	}
	_, _, err := invoke(ctx, w, "prepare", 5*time.Minute)
	return err
}

// invoke runs sysbench and returns its output and the CPU time it used.
func invoke(ctx context.Context, w Workload, action string, limit time.Duration) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sysbench", w.args(action)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", 0, fmt.Errorf("sysbench %s %s (port %d, %d threads): %w\n%s", w.Test, action, w.Port, w.Threads, err, out)
	}
	return string(out), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}
