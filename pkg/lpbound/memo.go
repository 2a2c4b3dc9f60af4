package lpbound

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"slices"
	"sync"
)

// memo remembers the last results of Patterns by their whole input. The
// disruption loop plans the same sets of pods again on every pass until
// the cluster changes (and joiner simulate does so thousands of times);
// Patterns is deterministic, so a remembered result is the result, and
// only the time differs.
//
// It keeps 512 results: a pass's problems recur in the next pass, not a
// day later, and each result holds its patterns (some kilobytes), which
// the controller's memory limit counts. The key is the SHA-256 of the
// whole input (names aside), 32 bytes rather than the input's kilobytes;
// a collision is not a risk worth weighing.
var memo = &patternMemo{max: 512, entries: map[string]*list.Element{}, order: list.New()}

type patternMemo struct {
	mu      sync.Mutex
	max     int
	entries map[string]*list.Element
	order   *list.List // most recently used first
}

type memoEntry struct {
	key string
	res PatternResult
}

// get returns a copy of the result remembered for key.
func (m *patternMemo) get(key string) (PatternResult, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok {
		return PatternResult{}, false
	}
	m.order.MoveToFront(e)
	return copyResult(e.Value.(*memoEntry).res), true
}

func (m *patternMemo) put(key string, res PatternResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok {
		m.order.MoveToFront(e)
		return
	}
	m.entries[key] = m.order.PushFront(&memoEntry{key: key, res: copyResult(res)})
	for m.order.Len() > m.max {
		last := m.order.Back()
		m.order.Remove(last)
		delete(m.entries, last.Value.(*memoEntry).key)
	}
}

// copyResult is a deep copy: callers may keep and change what they get.
func copyResult(r PatternResult) PatternResult {
	out := r
	out.Patterns = make([]Pattern, len(r.Patterns))
	for i, p := range r.Patterns {
		out.Patterns[i] = Pattern{Kind: p.Kind, Counts: slices.Clone(p.Counts)}
	}
	out.Use = slices.Clone(r.Use)
	out.Uncovered = slices.Clone(r.Uncovered)
	return out
}

// memoKey encodes everything Patterns reads (names aside, which only its
// errors use). It is empty when the input cannot be keyed: a Knapsack
// oracle is a function.
func memoKey(kinds []Kind, shapes []Shape, limits []Limit, opt PatternOptions) string {
	if opt.Knapsack != nil {
		return ""
	}
	b := make([]byte, 0, 64*(len(kinds)+len(shapes)))
	f := func(v float64) { b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v)) }
	n := func(v int) { b = binary.AppendVarint(b, int64(v)) }
	n(len(kinds))
	for _, k := range kinds {
		f(k.Price)
		n(len(k.Capacity))
		for _, c := range k.Capacity {
			f(c)
		}
	}
	n(len(shapes))
	for _, s := range shapes {
		f(s.Count)
		n(s.PerNode)
		n(len(s.Request))
		for _, r := range s.Request {
			f(r)
		}
		n(len(s.Kinds))
		for _, k := range s.Kinds {
			n(k)
		}
	}
	n(len(limits))
	for _, l := range limits {
		f(l.Max)
		n(len(l.Kinds))
		for i, k := range l.Kinds {
			n(k)
			f(l.Use[i])
		}
	}
	n(opt.KnapsackNodes)
	n(opt.MaxRounds)
	n(opt.TotalKnapsackNodes)
	n(opt.GiveUpAfter)
	n(opt.PerRound)
	f(opt.Tolerance)
	n(len(opt.Seed))
	for _, p := range opt.Seed {
		n(p.Kind)
		n(len(p.Counts))
		for _, c := range p.Counts {
			n(c)
		}
	}
	sum := sha256.Sum256(b)
	return string(sum[:])
}
