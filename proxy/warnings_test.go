package proxy

import (
	"bytes"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestWarnings: the schema refresh's quieter logger drops info lines
// from an info logger, and leaves an error-only logger (--log-level
// error) as it is instead of having zap complain on its error output at
// every refresh.
func TestWarnings(t *testing.T) {
	core, seen := observer.New(zap.InfoLevel)
	l := warnings(zap.New(core))
	l.Info("read the schema")
	l.Warn("a rule does not fit its table")
	if got := seen.Len(); got != 1 || seen.All()[0].Level != zap.WarnLevel {
		t.Fatalf("info logger: %d lines logged (%v), want the warning alone", got, seen.All())
	}

	var complaints bytes.Buffer
	core, seen = observer.New(zap.ErrorLevel)
	l = warnings(zap.New(core, zap.ErrorOutput(zapcore.AddSync(&complaints))))
	l.Warn("a rule does not fit its table")
	l.Error("the schema could not be read")
	if seen.Len() != 1 || complaints.Len() != 0 {
		t.Fatalf("error logger: %d lines logged, zap's error output %q; want the error alone and nothing there", seen.Len(), complaints.String())
	}
}
