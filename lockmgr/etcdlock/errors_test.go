package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// TestClassify: an answer that says etcd could not answer in time is
// ErrUnavailable (the statement waits the outage out, up to its
// wait_timeout), however the server's gRPC coded it; other errors are
// not. A server's own deadline that ran out came back from etcd 3.4 as
// code Unknown with the context's message, and a guarded statement was
// refused with 1105 at once where it should have tried again.
func TestClassify(t *testing.T) {
	k := lockmgr.Key{Rule: "sku-stock", Name: "shop.sku/1"}
	for _, tc := range []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"deadline, coded", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true},
		{"deadline, uncoded", status.Error(codes.Unknown, "context deadline exceeded"), true},
		{"canceled, uncoded", status.Error(codes.Unknown, "context canceled"), true},
		{"deadline, wrapped", fmt.Errorf("txn: %w", status.Error(codes.Unknown, "context deadline exceeded")), true},
		{"unavailable", status.Error(codes.Unavailable, "connection refused"), true},
		{"no leader", rpctypes.ErrGRPCNoLeader, true},
		{"client deadline", context.DeadlineExceeded, true},
		{"unknown, other", status.Error(codes.Unknown, "some other failure"), false},
		{"not a status", errors.New("context deadline exceeded, said someone"), false},
		{"invalid", status.Error(codes.InvalidArgument, "context deadline exceeded"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unavailable(tc.err); got != tc.unavailable {
				t.Fatalf("unavailable(%v) = %v, want %v", tc.err, got, tc.unavailable)
			}
			got := classify(context.Background(), k, tc.err)
			if errors.Is(got, lockmgr.ErrUnavailable) != tc.unavailable {
				t.Fatalf("classify(%v) = %v: ErrUnavailable %v, want %v", tc.err, got, !tc.unavailable, tc.unavailable)
			}
		})
	}
}
