//go:build tools

// Package suite pins the module versions of Karpenter v1.14.1's regression
// suite, which make karpenter-e2e builds unchanged (go test -c
// sigs.k8s.io/karpenter/test/suites/regression) and runs against Joiner.
// It is a test harness, a module of its own: nothing of Joiner imports it,
// and go test ./... from the repository root does not enter it. The blank
// imports are the suite's own, so go mod tidy keeps their go.sum entries.
package suite

import (
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "sigs.k8s.io/karpenter/kwok/apis/v1alpha1"
	_ "sigs.k8s.io/karpenter/pkg/apis/v1"
	_ "sigs.k8s.io/karpenter/pkg/test"
	_ "sigs.k8s.io/karpenter/pkg/test/expectations"
	_ "sigs.k8s.io/karpenter/test/pkg/debug"
	_ "sigs.k8s.io/karpenter/test/pkg/environment/common"
)
