// Package events keeps what Joiner tells people through Kubernetes events
// readable, and the API server's load bounded: the same event about the
// same object is recorded once per window.
package events

import (
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// Window is how long an event, once recorded, is not recorded again about
// the same object with the same type, reason and message. The provisioner
// plans every 10 s while pods wait; without a window it told each of
// 10,000 waiting pods the same FailedScheduling reason every 10 s, a
// thousand writes a second that starved the API server. Karpenter's
// recorder deduplicates its events for two minutes too.
const Window = 2 * time.Minute

// maxRemembered bounds the events remembered in one generation (below),
// about 100 bytes each; past it a generation ends early, and an event of
// the oldest may be recorded again before its window ends.
const maxRemembered = 100_000

// Deduped returns rec recording each event at most once per Window; clk
// is the controller's clock.
func Deduped(rec record.EventRecorder, clk clock.PassiveClock) record.EventRecorder {
	return &deduped{EventRecorder: rec, clk: clk}
}

// deduped remembers events in two generations, each at most a Window
// long: when the current one ends, the one before it, whose events are all
// older than a Window, is dropped whole. An LRU of expiring entries (as
// client-go's) drops an expired entry only when it is read again or
// pushed out, so over an hour of pods coming and going it stayed full:
// 11.5 MB of the controller's heap at the end of scale run 7.
type deduped struct {
	record.EventRecorder
	clk clock.PassiveClock

	mu       sync.Mutex
	current  map[uint64]time.Time
	previous map[uint64]time.Time
	since    time.Time
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
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clk.Now()
	if d.current == nil || now.Sub(d.since) >= Window || len(d.current) >= maxRemembered {
		d.previous, d.current, d.since = d.current, map[uint64]time.Time{}, now
	}
	for _, gen := range []map[uint64]time.Time{d.current, d.previous} {
		if at, ok := gen[key]; ok && now.Sub(at) < Window {
			return false
		}
	}
	d.current[key] = now
	return true
}
