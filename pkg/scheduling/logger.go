package scheduling

import "k8s.io/klog/v2"

// nopLogger satisfies APIs that want a logger; the core logs nothing.
var nopLogger = klog.Background().V(100)
