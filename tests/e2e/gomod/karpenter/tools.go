//go:build tools

// Package tools names the command this build module exists for: Karpenter with its kwok cloud provider.
package tools

import _ "sigs.k8s.io/karpenter/kwok"
