package operator

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// apiServer133 lists and watches pods as kube-apiserver 1.33 does for an
// informer: no streaming list, a list at resource version "0" whole from
// the watch cache whatever its limit, other lists paged when asked. Its
// first watch ends at once, as the API server ended the pod informer's
// watch in scale run 9, so the reflector relists.
type apiServer133 struct {
	pods []corev1.Pod
	// expire ends the first continue of a list with Expired, as when the
	// server has compacted the token away.
	expire bool

	mu      sync.Mutex
	lists   []metav1.ListOptions
	watches int
	relist  chan struct{} // closed at the watch after the relist
}

func (s *apiServer133) List(opts metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	s.lists = append(s.lists, opts)
	s.mu.Unlock()
	from := 0
	if opts.Continue != "" {
		if s.expire {
			s.expire = false
			return nil, apierrors.NewResourceExpired("the provided continue parameter is too old")
		}
		from, _ = strconv.Atoi(opts.Continue)
	}
	to := len(s.pods)
	if opts.ResourceVersion != "0" && opts.Limit > 0 {
		to = min(to, from+int(opts.Limit))
	}
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}}
	for i := from; i < to; i++ {
		list.Items = append(list.Items, *s.pods[i].DeepCopy())
	}
	if to < len(s.pods) {
		list.Continue = strconv.Itoa(to)
	}
	return list, nil
}

func (s *apiServer133) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	if opts.SendInitialEvents != nil {
		return nil, apierrors.NewBadRequest("sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watches++
	switch s.watches {
	case 1:
		return watch.NewEmptyWatch(), nil
	case 2:
		close(s.relist)
	}
	return watch.NewFake(), nil
}

func plain(lw toolscache.ListerWatcher) toolscache.ListerWatcher { return lw }

func trimmed(lw toolscache.ListerWatcher) toolscache.ListerWatcher {
	return TrimmedRelists(lw, cacheTransform)
}

// TestRelistIsPagedAndTrimmed runs client-go's reflector against a server
// like kube-apiserver 1.33 whose first watch ends at once. The relist must
// be asked for in pages, reach the store trimmed and, when a continue token
// expires, still be whole: client-go's pager would take the first page of
// its retry for the whole list.
func TestRelistIsPagedAndTrimmed(t *testing.T) {
	const pods = 1200
	cases := []struct {
		name string
		lw   func(toolscache.ListerWatcher) toolscache.ListerWatcher
		// wantLimit is the limit of the relist's first request.
		wantLimit int64
		trimmed   bool
		// expire: a continue token of the relist expires.
		expire bool
	}{
		{"client-go's reflector alone", plain, 0, false, false},
		{"TrimmedRelists", trimmed, relistPage, true, false},
		{"TrimmedRelists, a continue token expired", trimmed, relistPage, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			server := &apiServer133{relist: make(chan struct{}), expire: tc.expire}
			for i := range pods {
				server.pods = append(server.pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("p%d", i), Namespace: "default",
					ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}},
				}})
			}
			// No transform on the informer: what it stores is what the lister returned.
			informer := toolscache.NewSharedIndexInformer(tc.lw(server), &corev1.Pod{}, 0, toolscache.Indexers{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// The relist replaces every pod: an update for each it still
			// lists, a deletion for each it does not.
			var replaced atomic.Int64
			if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
				UpdateFunc: func(_, _ any) { replaced.Add(1) },
				DeleteFunc: func(any) { replaced.Add(1) },
			}); err != nil {
				t.Fatal(err)
			}
			go informer.RunWithContext(ctx)
			select {
			case <-server.relist:
			case <-time.After(30 * time.Second):
				t.Fatal("the reflector did not relist after its watch ended")
			}
			for deadline := time.Now().Add(30 * time.Second); replaced.Load() < pods; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the informer handled %d of the relist's %d pods", replaced.Load(), pods)
				}
			}

			server.mu.Lock()
			lists := server.lists
			server.mu.Unlock()
			var relist []metav1.ListOptions
			for _, o := range lists {
				if o.ResourceVersion == "10" || o.Continue != "" && len(relist) > 0 {
					relist = append(relist, o)
				}
			}
			if len(relist) == 0 {
				t.Fatalf("no list at the watch's resource version among %+v", lists)
			}
			if relist[0].Limit != tc.wantLimit {
				t.Errorf("relist asked for limit %d, want %d", relist[0].Limit, tc.wantLimit)
			}
			if tc.wantLimit > 0 && !tc.expire {
				if want := (pods + relistPage - 1) / relistPage; len(relist) != want {
					t.Errorf("relist read %d pages, want %d", len(relist), want)
				}
				for i, o := range relist {
					if o.Limit != tc.wantLimit {
						t.Errorf("relist page %d asked for limit %d, want %d", i+1, o.Limit, tc.wantLimit)
					}
				}
			}
			stored := informer.GetStore().List()
			if len(stored) != pods {
				t.Fatalf("store holds %d pods after the relist, want %d", len(stored), pods)
			}
			untrimmed := 0
			for _, o := range stored {
				if o.(*corev1.Pod).ManagedFields != nil {
					untrimmed++
				}
			}
			if tc.trimmed && untrimmed > 0 {
				t.Errorf("%d of %d pods reached the store with their managed fields", untrimmed, pods)
			}
			if !tc.trimmed && untrimmed != pods {
				t.Errorf("%d of %d pods came untrimmed; the lister alone does not trim", untrimmed, pods)
			}
		})
	}
}

func TestIsWholeRelist(t *testing.T) {
	cases := []struct {
		name string
		opts metav1.ListOptions
		want bool
	}{
		{"first list, from the watch cache", metav1.ListOptions{ResourceVersion: "0", Limit: 500}, false},
		{"relist at the last resource version", metav1.ListOptions{ResourceVersion: "42"}, true},
		{"relist at the latest, the last one gone", metav1.ListOptions{ResourceVersion: ""}, true},
		{"a later page of a relist", metav1.ListOptions{Continue: "abc"}, true},
		{"a page already asked for", metav1.ListOptions{ResourceVersion: "42", Limit: 100}, false},
		{"a later page already asked for", metav1.ListOptions{Continue: "abc", Limit: 100}, false},
	}
	for _, tc := range cases {
		if got := isWholeRelist(tc.opts); got != tc.want {
			t.Errorf("%s: isWholeRelist = %v, want %v", tc.name, got, tc.want)
		}
	}
}
