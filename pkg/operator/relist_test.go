package operator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	// streams answers a streamed list (WatchList) as kube-apiserver 1.34
	// and later do.
	streams bool
	// hold, when set, keeps the first watch open until it is closed.
	hold chan struct{}

	mu       sync.Mutex
	lists    []metav1.ListOptions
	watches  int
	streamed int
	relist   chan struct{} // closed at the watch after the relist
}

func (s *apiServer133) List(opts metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists = append(s.lists, opts)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	var stream *watch.FakeWatcher
	if opts.SendInitialEvents != nil {
		if !s.streams {
			return nil, apierrors.NewBadRequest("sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled")
		}
		s.streamed++
		stream = watch.NewFakeWithChanSize(len(s.pods)+1, false)
		for i := range s.pods {
			stream.Add(s.pods[i].DeepCopy())
		}
		stream.Action(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "10",
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	}
	s.watches++
	relisted := s.streamed > 1 || slices.ContainsFunc(s.lists, func(o metav1.ListOptions) bool { return o.ResourceVersion != "0" })
	switch {
	case relisted:
		select {
		case <-s.relist:
		default:
			close(s.relist)
		}
	case s.hold != nil && s.watches == 1:
		if stream == nil {
			stream = watch.NewFake()
		}
		go func() { <-s.hold; stream.Stop() }()
	case stream == nil:
		return watch.NewEmptyWatch(), nil
	}
	if stream == nil {
		return watch.NewFake(), nil
	}
	return stream, nil
}

func plain(lw toolscache.ListerWatcher) toolscache.ListerWatcher { return lw }

func paged(lw toolscache.ListerWatcher) toolscache.ListerWatcher {
	return TrimmedRelists(lw, cacheTransform, nil)
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
		{"TrimmedRelists", paged, relistPage, true, false},
		{"TrimmedRelists, a continue token expired", paged, relistPage, true, true},
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

// TestRelistKeepsHeldObjects runs a relist, paged or streamed, after the
// server changed some pods, deleted some and added some. Each pod the
// cache holds at the resource version the relist returns must stay the
// very object the cache held, so the relist adds no second copy of it;
// the rest come trimmed. The lister without the cache, the control case,
// replaces every pod.
func TestRelistKeepsHeldObjects(t *testing.T) {
	const pods, changed, deleted, added = 1200, 100, 100, 50
	cases := []struct {
		name    string
		streams bool
		held    bool
	}{
		{"a paged relist", false, true},
		{"a streamed relist (WatchList)", true, true},
		{"a paged relist, the cache not read", false, false},
	}
	pod := func(i int, rv string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("p%d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("u%d", i)), ResourceVersion: rv,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}},
		}}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			server := &apiServer133{relist: make(chan struct{}), streams: tc.streams, hold: make(chan struct{})}
			for i := range pods {
				server.pods = append(server.pods, pod(i, "5"))
			}
			var informer toolscache.SharedIndexInformer
			if tc.held {
				informer = newInformer(server, &corev1.Pod{}, 0, toolscache.Indexers{})
			} else {
				informer = toolscache.NewSharedIndexInformer(TrimmedRelists(server, cacheTransform, nil), &corev1.Pod{}, 0, toolscache.Indexers{})
			}
			// As controller-runtime sets the cache's DefaultTransform.
			if err := informer.SetTransform(cacheTransform); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go informer.RunWithContext(ctx)
			if !toolscache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
				t.Fatal("the informer did not sync")
			}
			before := map[string]any{}
			for _, o := range informer.GetStore().List() {
				before[o.(*corev1.Pod).Name] = o
			}
			if len(before) != pods {
				t.Fatalf("the first list stored %d pods, want %d", len(before), pods)
			}

			server.mu.Lock()
			for i := range changed {
				server.pods[i].ResourceVersion = "11"
				server.pods[i].Labels = map[string]string{"changed": "yes"}
			}
			server.pods = server.pods[:pods-deleted]
			for i := range added {
				server.pods = append(server.pods, pod(pods+i, "11"))
			}
			server.mu.Unlock()
			close(server.hold)
			select {
			case <-server.relist:
			case <-time.After(30 * time.Second):
				t.Fatal("the reflector did not relist after its watch ended")
			}
			// The added pods come last in the relist: once the last is
			// stored, so is every pod before it. Meanwhile every pod held
			// is read, as the controllers read the cache: under -race, a
			// transform that writes to what the relist kept is caught.
			last := fmt.Sprintf("default/p%d", pods+added-1)
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				for _, o := range informer.GetStore().List() {
					_ = o.(*corev1.Pod).DeepCopy()
				}
				if _, ok, _ := informer.GetStore().GetByKey(last); ok && len(informer.GetStore().ListKeys()) == pods-deleted+added {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the store holds %d pods, want %d with %s", len(informer.GetStore().ListKeys()), pods-deleted+added, last)
				}
			}

			server.mu.Lock()
			streamed, relists := server.streamed, slices.ContainsFunc(server.lists, func(o metav1.ListOptions) bool { return o.ResourceVersion != "0" })
			server.mu.Unlock()
			if tc.streams && streamed < 2 || !tc.streams && !relists {
				t.Fatalf("streamed %d lists, relisted %v: not the relist this case is about", streamed, relists)
			}
			kept, fresh := 0, 0
			for _, o := range informer.GetStore().List() {
				p := o.(*corev1.Pod)
				if p.ManagedFields != nil {
					t.Errorf("%s reached the store untrimmed", p.Name)
				}
				if before[p.Name] == o {
					kept++
				} else {
					fresh++
				}
				if p.ResourceVersion == "11" && before[p.Name] != nil && p.Labels["changed"] != "yes" {
					t.Errorf("%s: stored at resource version 11 without the change", p.Name)
				}
			}
			unchanged := pods - changed - deleted
			if tc.held && (kept != unchanged || fresh != changed+added) {
				t.Errorf("the relist kept %d held pods and stored %d new ones, want %d and %d", kept, fresh, unchanged, changed+added)
			}
			if !tc.held && kept != 0 {
				t.Errorf("without the cache the relist kept %d held pods, want none", kept)
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
