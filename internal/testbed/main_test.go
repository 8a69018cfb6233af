package testbed_test

import (
	"os"
	"testing"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }
