package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/joiner-autoscaler/joiner/internal/localcluster"
	"golang.org/x/sync/errgroup"
)

// selected are the groups named in only, in the order of groups.
func selected(only string) []group {
	var out []group
	for _, g := range groups {
		if strings.Contains(","+only+",", ","+g.Name+",") {
			out = append(out, g)
		}
	}
	return out
}

// lanes splits the groups into runs that can go side by side, each on a
// control plane and a Joiner of its own (the suite's cleanup after every
// spec deletes every NodePool and NodeClaim it made, so two groups cannot
// share a cluster at once). Core, the longest group (about 78 minutes of
// the run's 110), goes alone; the others follow one another beside it.
// Most of a spec's time is spent waiting on the suite's own timeouts, so
// two lanes fit on 2 cores. Without parallel, everything is one lane.
func lanes(gs []group, parallel bool) [][]group {
	if !parallel {
		return [][]group{gs}
	}
	var core, rest []group
	for _, g := range gs {
		if g.Name == "core" {
			core = append(core, g)
		} else {
			rest = append(rest, g)
		}
	}
	var out [][]group
	for _, l := range [][]group{core, rest} {
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// runLanes runs each lane on its own control plane and Joiner, the lanes
// at once, and returns every group's results in the order of groups.
func runLanes(ctx context.Context, root, work, suite, joiner, gates, focus string, ls [][]group) ([]result, error) {
	results := make([][]result, len(ls))
	eg, ctx := errgroup.WithContext(ctx)
	for i, lane := range ls {
		eg.Go(func() error {
			rs, err := runLane(ctx, root, filepath.Join(work, fmt.Sprintf("lane%d", i+1)), suite, joiner, gates, focus, lane)
			results[i] = rs
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	var out []result
	for _, g := range groups {
		for _, rs := range results {
			for _, r := range rs {
				if r.Group == g.Name {
					out = append(out, r)
				}
			}
		}
	}
	return out, nil
}

// runLane starts a control plane and Joiner in dir and runs the lane's
// groups one after another on them.
func runLane(ctx context.Context, root, dir, suite, joiner, gates, focus string, lane []group) ([]result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	name := lane[0].Name
	cluster, err := localcluster.Start(ctx, localcluster.Options{Dir: filepath.Join(dir, "cluster"), Root: root,
		Progress: func(f string, a ...any) { logf(name+" lane: "+f, a...) }})
	if err != nil {
		return nil, err
	}
	defer cluster.Stop()
	if err := localcluster.InstallCRDs(ctx, cluster.Config, filepath.Join(root, "config", "crd")); err != nil {
		return nil, err
	}
	stop, err := startJoiner(ctx, joiner, cluster.Kubeconfig, gates, filepath.Join(dir, "joiner.log"))
	if err != nil {
		return nil, err
	}
	defer stop()
	var out []result
	for _, g := range lane {
		rs, err := runGroup(ctx, suite, dir, cluster.Kubeconfig, g, focus)
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", g.Name, err)
		}
		out = append(out, rs...)
	}
	return out, nil
}
