package testbed

import "context"

// Server names one server of a bed.
type Server string

// The servers of a bed.
const (
	Primary Server = "primary"
	Replica Server = "replica"
	Redis   Server = "redis"
)

// Kill sends SIGKILL to s and waits until the process is gone: a crash,
// with no clean shutdown. It returns ErrShared on a shared bed.
func (b *Bed) Kill(ctx context.Context, s Server) error { return b.control(ctx, "kill", s) }

// Stop shuts s down cleanly (SIGTERM) and waits until it has exited.
// It returns ErrShared on a shared bed.
func (b *Bed) Stop(ctx context.Context, s Server) error { return b.control(ctx, "stop", s) }

// Start starts a stopped or killed s again on its old port and waits until
// it answers; for the replica (or the primary while the replica runs) also
// until replication runs and has caught up. Redis comes back empty. It
// returns ErrShared on a shared bed.
func (b *Bed) Start(ctx context.Context, s Server) error { return b.control(ctx, "start", s) }

// Restart stops s cleanly if it runs and starts it again, like Start.
// It returns ErrShared on a shared bed.
func (b *Bed) Restart(ctx context.Context, s Server) error { return b.control(ctx, "restart", s) }

// KillReplica sends SIGKILL to the replica's mariadbd; see Kill.
func (b *Bed) KillReplica(ctx context.Context) error { return b.Kill(ctx, Replica) }

// RestartReplica restarts the replica's mariadbd, whether it runs or was
// killed, and waits until replication has caught up; see Restart.
func (b *Bed) RestartReplica(ctx context.Context) error { return b.Restart(ctx, Replica) }

// RestartRedis restarts Redis on its old port. Redis keeps nothing on disk,
// so every key (every lock) is gone afterwards, as after a failover to an
// empty replica.
func (b *Bed) RestartRedis(ctx context.Context) error { return b.Restart(ctx, Redis) }

func (b *Bed) control(ctx context.Context, action string, s Server) error {
	if b.Shared {
		return ErrShared
	}
	ctx, cancel := bounded(ctx, startTimeout)
	defer cancel()
	_, err := runScript(ctx, nil, action, b.Dir, string(s))
	return err
}
