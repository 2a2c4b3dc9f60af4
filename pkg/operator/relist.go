package operator

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// relistPage is how many objects a relist asks the API server for at a
// time: the page size client-go's pager uses for a first list.
const relistPage = 500

// CacheOptions are the options of the controller's informers: every object
// trimmed as it enters the cache, and a relist read in trimmed pages that
// keeps the objects the cache already holds.
// Exported for test/scale, which measures a relist with them.
func CacheOptions() cache.Options {
	return cache.Options{DefaultTransform: cacheTransform, NewInformer: newInformer}
}

func newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	held := &informerStore{}
	held.informer = toolscache.NewSharedIndexInformer(TrimmedRelists(lw, cacheTransform, held), obj, resync, indexers)
	return held.informer
}

// informerStore reads an informer's cache for the lister that feeds it,
// which must exist before the informer does.
type informerStore struct {
	informer toolscache.SharedIndexInformer
}

func (s *informerStore) GetByKey(key string) (any, bool, error) {
	return s.informer.GetStore().GetByKey(key)
}

// TrimmedRelists pages a reflector's relist and trims each page as it
// comes.
//
// When the API server ends a watch the reflector lists everything again.
// A server that streams lists (WatchList, on by default from
// kube-apiserver 1.34) sends the objects one by one, and the reflector
// trims each as it comes. Without it (1.33 and older, or when the stream
// fails) the reflector asks for the whole list in one answer, to be served
// from the watch cache: at 10,000 pods that was 24 MB of protobuf and
// every pod decoded in full, beside the cache it replaces, before the
// cache's transform trimmed any (69 MB of scale run 9's heap, and its one
// moment over 300 MiB). Asked for in pages of relistPage and trimmed page
// by page, a relist holds one untrimmed page at a time. A paged list at a
// resource version is read from etcd rather than the watch cache. client-go
// asks for the whole list so that every client of a restarted API server
// does not go to etcd at once; one controller relisting after the server
// ended a watch can.
//
// Trimmed pages alone still built a second list beside the cache, 47 MiB
// at 10,000 pods on about 250 MiB. Most of a relist is what the cache holds
// already, so where held (the informer's cache) has an object at the same
// resource version, that object goes into the list (keepHeld) and the new
// copy goes with its page. A relist then adds only what changed; a streamed
// list's objects are kept the same way.
//
// transform must be idempotent and must not write to an object it would
// leave as it is: the informer applies it again, to objects held among them.
// held may be nil. Exported for test/scale.
func TrimmedRelists(lw toolscache.ListerWatcher, transform toolscache.TransformFunc, held toolscache.KeyGetter) toolscache.ListerWatcher {
	inner := toolscache.ToListerWatcherWithContext(lw)
	paged := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if isWholeRelist(opts) {
				return listInPages(ctx, inner, opts, transform, held)
			}
			// Any other list comes whole or in the pager's pages; the
			// informer's transform trims it.
			return inner.ListWithContext(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := inner.WatchWithContext(ctx, opts)
			if err != nil || held == nil || opts.SendInitialEvents == nil || !*opts.SendInitialEvents {
				return w, err
			}
			// A streamed list: its objects come as additions.
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				if e.Type == watch.Added {
					if o := keepHeld(held, e.Object); o != nil {
						e.Object = o
					}
				}
				return e, true
			}), nil
		},
	}
	if watchlist.DoesClientNotSupportWatchListSemantics(lw) {
		return toolscache.ToListWatcherWithWatchListSemantics(paged, lw)
	}
	return paged
}

// isWholeRelist tells a list the reflector asks for whole, without a
// limit: a relist, at its last resource version or, if that has gone, at
// the latest. A first list, at resource version "0", is left as it is: the
// watch cache answers it whole whatever its limit.
func isWholeRelist(opts metav1.ListOptions) bool {
	return opts.Limit == 0 && opts.ResourceVersion != "0"
}

// listInPages reads a list its caller wants whole in pages of relistPage,
// trims each page as it comes, and returns the list whole, in the form
// client-go's pager gives a paged list. It never returns part of a list:
// the pager, when a continue token has expired, asks again for the whole
// list at once and takes the answer as all there is. An expired token ends
// this list with the server's Expired error instead, and the reflector then
// lists again from the latest resource version.
func listInPages(ctx context.Context, lw toolscache.ListerWithContext, opts metav1.ListOptions, transform toolscache.TransformFunc, held toolscache.KeyGetter) (runtime.Object, error) {
	whole := &metainternalversion.List{}
	opts.Limit = relistPage
	for first := true; ; first = false {
		page, err := lw.ListWithContext(ctx, opts)
		if err != nil {
			return nil, err
		}
		m, err := meta.ListAccessor(page)
		if err != nil {
			return nil, err
		}
		if first {
			whole.ResourceVersion = m.GetResourceVersion()
		}
		// Each item its own allocation, so that the page's array goes.
		if err := meta.EachListItemWithAlloc(page, func(o runtime.Object) error {
			if h := keepHeld(held, o); h != nil {
				whole.Items = append(whole.Items, h)
				return nil
			}
			if _, err := transform(o); err != nil {
				return err
			}
			whole.Items = append(whole.Items, o)
			return nil
		}); err != nil {
			return nil, err
		}
		if m.GetContinue() == "" {
			return whole, nil
		}
		opts.Continue, opts.ResourceVersion, opts.ResourceVersionMatch = m.GetContinue(), "", ""
	}
}

// keepHeld returns the object held has for o's key when it is o at the same
// resource version (the same write to etcd, already trimmed), or nil.
func keepHeld(held toolscache.KeyGetter, o runtime.Object) runtime.Object {
	if held == nil {
		return nil
	}
	m, err := meta.Accessor(o)
	if err != nil || m.GetResourceVersion() == "" {
		return nil
	}
	h, ok, err := held.GetByKey(toolscache.MetaObjectToName(m).String())
	if err != nil || !ok {
		return nil
	}
	hm, err := meta.Accessor(h)
	if err != nil || hm.GetUID() != m.GetUID() || hm.GetResourceVersion() != m.GetResourceVersion() {
		return nil
	}
	ho, _ := h.(runtime.Object)
	return ho
}
