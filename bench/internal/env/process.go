package env

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// process is a child the bench started, in a process group of its own,
// with its exit kept for any number of readers. Proxy and Relay embed it.
type process struct {
	PID  int
	cmd  *exec.Cmd
	done chan error // the exit error once it ended; every reader puts it back
}

// start starts cmd in a process group of its own and watches for its exit.
func (p *process) start(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd, p.PID, p.done = cmd, cmd.Process.Pid, make(chan error, 1)
	go func() { p.done <- cmd.Wait() }()
	return nil
}

// waitExit waits up to d (or until ctx ends) for the process to end and
// reports whether it did, with its exit error; d = 0 only looks.
func (p *process) waitExit(ctx context.Context, d time.Duration) (bool, error) {
	if p.done == nil {
		return false, nil
	}
	select { // an ended process wins over a timer that is ready too
	case err := <-p.done:
		p.done <- err
		return true, err
	default:
	}
	if d <= 0 {
		return false, nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-p.done:
		p.done <- err
		return true, err
	case <-t.C:
	case <-ctx.Done():
	}
	return false, nil
}

// Exited reports whether the process has ended (crashed or stopped).
func (p *process) Exited() bool {
	ended, _ := p.waitExit(context.Background(), 0)
	return ended
}

// stop sends SIGTERM to the process group (children included), waits for
// the process to exit, SIGKILLs the group after stopGrace (or when ctx
// ends) and reports whether it had to.
func (p *process) stop(ctx context.Context) (killed bool) {
	if p.done == nil {
		return false
	}
	_ = syscall.Kill(-p.PID, syscall.SIGTERM)
	if ended, _ := p.waitExit(ctx, stopGrace); ended {
		return false
	}
	_ = syscall.Kill(-p.PID, syscall.SIGKILL)
	err := <-p.done
	p.done <- err
	return true
}
