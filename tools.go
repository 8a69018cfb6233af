//go:build tools

// Package tools pins dependencies that lockproxy packages use before any code imports them.
package tools

import (
	_ "github.com/go-mysql-org/go-mysql/client"
	_ "github.com/go-mysql-org/go-mysql/mysql"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/goccy/go-yaml"
	_ "github.com/hashicorp/golang-lru/v2"
	_ "github.com/pingcap/tidb/pkg/parser"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "github.com/redis/go-redis/v9"
	_ "go.uber.org/zap"
)
