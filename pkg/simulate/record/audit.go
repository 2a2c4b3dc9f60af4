package record

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	v1 "github.com/joiner-autoscaler/joiner/api/v1"
	"github.com/joiner-autoscaler/joiner/pkg/pods"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// ReadAudit records the workload changes of an API server audit log (the
// JSON lines of audit.k8s.io/v1 Events that --audit-log-path writes): the
// trace starts at its first event. It reads the successful writes, at
// their ResponseComplete stage, of Deployments and StatefulSets (their
// scale subresource too), Jobs (and their status, for how long they ran),
// bare Pods (created with no controller, and deleted) and NodePools. An
// object's response body (level RequestResponse) is read where the log
// has it, else the request's: a patch at level Request gives only what it
// changed, which for a workload's replicas is enough (a JSON patch is
// skipped, and so are patches of Jobs and NodePools without a response
// body). A whole write that changes a Deployment's or StatefulSet's spec
// other than its replicas (a new template) is an apply event, and its
// deletion a delete event; a deleted Job stops. A NodePool created in the
// log is applied then, and deleted, a delete event. Bare Pods there
// before the log began are not in it: give them with -f. It returns the recording,
// ended at the log's last event.
func ReadAudit(in io.Reader) (*Recording, time.Time, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var rec *Recording
	var last time.Time
	line, used := 0, 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, last, fmt.Errorf("audit log line %d: %v; give the JSON lines the API server's --audit-log-path writes (--audit-log-format=json)", line, err)
		}
		at := ev.StageTimestamp.Time
		if rec == nil {
			rec = New(at)
		}
		if at.After(last) {
			last = at
		}
		if ev.Stage != auditv1.StageResponseComplete || ev.ObjectRef == nil || (ev.ResponseStatus != nil && ev.ResponseStatus.Code >= 300) {
			continue
		}
		ref := ev.ObjectRef
		if ev.Verb == "delete" {
			// A deleted Deployment's pods go; a deleted Job's stop.
			switch kind := scaledKinds[ref.Resource]; {
			case ref.APIGroup == "apps" && kind != "" && ref.Subresource == "":
				rec.WorkloadGone(at, kind, ref.Namespace, ref.Name)
				used++
			case ref.APIGroup == "batch" && ref.Resource == "jobs" && ref.Subresource == "":
				rec.JobGone(at, ref.Namespace, ref.Name)
			case ref.APIGroup == "" && ref.Resource == "pods" && ref.Subresource == "":
				rec.PodGone(at, ref.Namespace, ref.Name)
			case ref.APIGroup == v1.Group && ref.Resource == "nodepools" && ref.Subresource == "":
				rec.NodePoolGone(at, ref.Name)
			}
			continue
		}
		if ev.Verb != "create" && ev.Verb != "update" && ev.Verb != "patch" {
			continue
		}
		// A body is whole in a response, and in the request of a create or
		// an update; a patch's request holds only what it changes.
		body, whole := ev.ResponseObject, true
		if body == nil {
			body, whole = ev.RequestObject, ev.Verb != "patch"
		}
		if body == nil || len(body.Raw) == 0 || body.Raw[0] == '[' {
			// Nothing to read, or a JSON patch, whose operations are not
			// the object.
			continue
		}
		if ok, err := recordAudit(rec, at, ev.Verb, ref, body, whole); err != nil {
			return nil, last, fmt.Errorf("audit log line %d (%s %s %s/%s): %v", line, ev.Verb, ref.Resource, ref.Namespace, ref.Name, err)
		} else if ok {
			used++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, last, err
	}
	if used == 0 {
		return nil, last, fmt.Errorf("the audit log has no successful write of a Deployment, StatefulSet, Job, bare Pod or NodePool with its body: log them at level Request or RequestResponse (the audit policy's rules for group apps resources deployments, deployments/scale, statefulsets and statefulsets/scale, batch jobs and jobs/status, core pods, karpenter.sh nodepools)")
	}
	return rec, last, nil
}

// scaledKinds are the workloads whose replicas the trace follows, by
// resource.
var scaledKinds = map[string]string{"deployments": "Deployment", "statefulsets": "StatefulSet"}

// recordAudit records one write; ok reports that it was one the trace
// uses. A body that is not whole (a patch's request) gives a Deployment's
// replicas, if it sets them, and nothing else.
func recordAudit(rec *Recording, at time.Time, verb string, ref *auditv1.ObjectReference, body *runtime.Unknown, whole bool) (bool, error) {
	kind := scaledKinds[ref.Resource]
	switch {
	case ref.APIGroup == "apps" && kind != "" && ref.Subresource == "scale":
		var scale struct {
			Spec struct {
				Replicas *int `json:"replicas"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(body.Raw, &scale); err != nil || scale.Spec.Replicas == nil {
			return false, err
		}
		rec.Scale(at, kind, ref.Namespace, ref.Name, *scale.Spec.Replicas)
	case ref.APIGroup == "apps" && kind != "" && ref.Subresource == "":
		var obj struct {
			metav1.ObjectMeta `json:"metadata"`
			Spec              struct {
				Replicas *int32 `json:"replicas"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(body.Raw, &obj); err != nil {
			return false, err
		}
		if obj.Name == "" {
			obj.Name, obj.Namespace = ref.Name, ref.Namespace
		}
		if !whole {
			if obj.Spec.Replicas == nil {
				return false, nil
			}
			rec.Scale(at, kind, obj.Namespace, obj.Name, int(*obj.Spec.Replicas))
			return true, nil
		}
		if kind == "StatefulSet" {
			var sts appsv1.StatefulSet
			if err := json.Unmarshal(body.Raw, &sts); err != nil {
				return false, err
			}
			sts.Name, sts.Namespace = obj.Name, obj.Namespace
			rec.StatefulSet(at, &sts, verb == "create")
			return true, nil
		}
		var d appsv1.Deployment
		if err := json.Unmarshal(body.Raw, &d); err != nil {
			return false, err
		}
		d.Name, d.Namespace = obj.Name, obj.Namespace
		rec.Deployment(at, &d, verb == "create")
	case ref.APIGroup == "" && ref.Resource == "pods" && ref.Subresource == "" && verb == "create":
		var p corev1.Pod
		if err := json.Unmarshal(body.Raw, &p); err != nil {
			return false, err
		}
		if p.Name == "" {
			p.Name, p.Namespace = ref.Name, ref.Namespace
		}
		if !whole || p.Name == "" || metav1.GetControllerOf(&p) != nil || pods.IsOwnedByNode(&p) {
			return false, nil
		}
		rec.Pod(at, &p, true)
	case ref.APIGroup == "batch" && ref.Resource == "jobs":
		var j batchv1.Job
		if err := json.Unmarshal(body.Raw, &j); err != nil {
			return false, err
		}
		if j.Name == "" {
			j.Name, j.Namespace = ref.Name, ref.Namespace
		}
		if !whole {
			return false, nil
		}
		rec.Job(at, &j)
	case ref.APIGroup == v1.Group && ref.Resource == "nodepools" && ref.Subresource == "":
		var np v1.NodePool
		if err := json.Unmarshal(body.Raw, &np); err != nil {
			return false, err
		}
		if !whole {
			return false, nil
		}
		rec.NodePool(at, &np, verb == "create")
	default:
		return false, nil
	}
	return true, nil
}
