package termination

import "k8s.io/klog/v2"

var nopLogger = klog.Background().V(100)
