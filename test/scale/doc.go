// Package scale runs the controller at the size of issue 20 on the local
// control plane (kwok nodes): 10,000 pods of 50 shapes across three
// NodePools, about 1,000 nodes, then an hour of churn; and what the pod
// informer holds while it lists 10,000 pods again. Its tests are behind
// the scale build tag (make scale); docs/benchmarks.md §7 has their figures.
package scale
