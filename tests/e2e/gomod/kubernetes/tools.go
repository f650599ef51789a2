//go:build tools

// Package tools names the commands this build module exists for, so that go mod tidy keeps
// their dependencies; build.sh builds them with one go build.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
