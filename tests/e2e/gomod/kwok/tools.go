//go:build tools

// Package tools names the command this build module exists for.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
