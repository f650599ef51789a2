//go:build tools

// Package tools names the command this build module exists for (built with -tags kwok).
package tools

import _ "k8s.io/autoscaler/cluster-autoscaler"
