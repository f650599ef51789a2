//go:build tools

// Package tools names the command this build module exists for (etcd's own main package).
package tools

import _ "go.etcd.io/etcd/server/v3"
