// Package events keeps what Joiner tells people through Kubernetes events
// readable, and the API server's load bounded: the same event about the
// same object is recorded once per window.
package events

import (
	"fmt"
	"hash/fnv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/tools/record"
)

// Window is how long an event, once recorded, is not recorded again about
// the same object with the same type, reason and message. The provisioner
// plans every 10 s while pods wait; without a window it told each of
// 10,000 waiting pods the same FailedScheduling reason every 10 s, a
// thousand writes a second that starved the API server. Karpenter's
// recorder deduplicates its events for two minutes too.
const Window = 2 * time.Minute

// maxRemembered bounds the memory the window takes: the most recent
// events, about 100 bytes each.
const maxRemembered = 100_000

// Deduped returns rec recording each event at most once per Window; clk
// is the controller's clock.
func Deduped(rec record.EventRecorder, clk cache.Clock) record.EventRecorder {
	return &deduped{EventRecorder: rec, seen: cache.NewLRUExpireCacheWithClock(maxRemembered, clk)}
}

type deduped struct {
	record.EventRecorder
	seen *cache.LRUExpireCache
}

func (d *deduped) Event(obj runtime.Object, eventtype, reason, message string) {
	if d.first(obj, eventtype, reason, message) {
		d.EventRecorder.Event(obj, eventtype, reason, message)
	}
}

func (d *deduped) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	d.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (d *deduped) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	message := fmt.Sprintf(messageFmt, args...)
	if d.first(obj, eventtype, reason, message) {
		d.EventRecorder.AnnotatedEventf(obj, annotations, eventtype, reason, "%s", message)
	}
}

// first reports whether the event is new in the window, and remembers it.
func (d *deduped) first(obj runtime.Object, eventtype, reason, message string) bool {
	about := ""
	if m, err := meta.Accessor(obj); err == nil {
		about = string(m.GetUID())
		if about == "" {
			about = obj.GetObjectKind().GroupVersionKind().Kind + "/" + m.GetNamespace() + "/" + m.GetName()
		}
	}
	// A 64-bit digest, not the text: at 10,000 pods the text was 7.5 MB.
	// Two events sharing a digest in one window are not a concern.
	h := fnv.New64a()
	for _, part := range []string{about, eventtype, reason, message} {
		_, _ = h.Write([]byte(part))
		_, _ = h.Write([]byte{0})
	}
	key := h.Sum64()
	if _, seen := d.seen.Get(key); seen {
		return false
	}
	d.seen.Add(key, struct{}{}, Window)
	return true
}
