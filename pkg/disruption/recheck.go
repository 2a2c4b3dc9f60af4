package disruption

import (
	"fmt"

	"github.com/joiner-autoscaler/joiner/pkg/scheduling"
)

// Recheck says why a command may no longer go ahead, asked just before its
// candidates are drained: on a fresh snapshot in which the candidates carry
// the disrupted taint, the pods that arrived on them meanwhile are there,
// pending pods keep their claims, and the command's replacements, now
// initialized, are capacity. Every pod of the candidates must still fit on
// the other nodes; needing more capacity would be a different plan, made
// for pods the command was not sized for. Empty when the command holds.
func Recheck(snap scheduling.Snapshot, cmd Command, sched scheduling.Options) string {
	cluster := scheduling.NewCluster(snap, sched)
	names := make([]string, 0, len(cmd.Candidates))
	for _, c := range cmd.Candidates {
		names = append(names, c.Node)
	}
	r, err := cluster.TryRemove(names...)
	switch {
	case err != nil:
		return err.Error()
	case len(r.Unschedulable) > 0:
		u := r.Unschedulable[0]
		return fmt.Sprintf("pod %s/%s would no longer fit elsewhere: %s", u.Pod.Namespace, u.Pod.Name, u.Reason)
	case len(r.Replacements) > 0:
		why := fmt.Sprintf("its pods no longer fit on the other nodes and the replacements; %d more node(s) would be needed", len(r.Replacements))
		if ps := r.Replacements[0].Pods; len(ps) > 0 {
			why += fmt.Sprintf(", for pod %s/%s first", ps[0].Namespace, ps[0].Name)
		}
		return why
	}
	return ""
}
