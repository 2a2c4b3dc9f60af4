package v1

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"slices"
	"strconv"
)

// NodePoolHashVersion names how Hash is computed; it is stamped next to
// every hash, and two hashes are compared only under the same version.
//
// It is ours, not Karpenter's. Karpenter writes the same annotation with
// versions "v1", "v2", "v3", ... but computes its hash differently, so a
// NodeClaim a Karpenter launched carries a hash that Joiner cannot compare:
// taking it for ours would drift every such NodeClaim after a migration.
// The value is deliberately not of Karpenter's "vN" form, so that no present
// or future Karpenter version can equal it. A NodeClaim stamped under any
// other version is re-stamped with the current hash instead of drifting, as
// Karpenter does when it bumps its own version. Change the value whenever
// the hash's inputs or encoding change.
const NodePoolHashVersion = "joiner-1"

// Hash fingerprints the parts of the template that, when changed, make
// existing nodes drift: metadata, taints, startup taints, the NodeClass
// reference, expireAfter and terminationGracePeriod. Requirements are left
// out; drift on them is judged by compatibility, not by equality. Taints are
// sets: reordering them changes nothing on a node, so it is not drift.
func (in *NodePool) Hash() string {
	t := in.Spec.Template
	return SetHash(struct {
		Labels, Annotations    map[string]string
		Taints, StartupTaints  any
		NodeClassRef           *NodeClassReference
		ExpireAfter            string
		TerminationGracePeriod any
	}{t.Labels, t.Annotations, t.Spec.Taints, t.Spec.StartupTaints, t.Spec.NodeClassRef, t.Spec.ExpireAfter.String(), t.Spec.TerminationGracePeriod})
}

// SetHash hashes v's JSON form with every list taken as a set (its elements
// sorted) and with null values, empty lists and empty maps left out, so that
// neither the order of a list nor writing "{}" for nothing changes the hash.
// Map keys are already ordered by encoding/json. Every list in the specs
// Joiner hashes is a set to the API (taints, block device mappings, ...),
// as Karpenter hashes them (slices as sets).
func SetHash(v any) string {
	b, err := json.Marshal(v)
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		// Numbers stay as written: float64 would round large integers.
		dec.UseNumber()
		var doc any
		if err = dec.Decode(&doc); err == nil {
			b, err = json.Marshal(canonical(doc))
		}
	}
	if err != nil {
		// The specs hashed are plain data that always encode; a failure is
		// a programming error, and an empty hash never matches a stamp.
		return ""
	}
	h := fnv.New64a()
	h.Write(b)
	return strconv.FormatUint(h.Sum64(), 10)
}

// canonical sorts every list of a decoded JSON document by its elements'
// canonical encoding and drops nulls, empty lists and empty maps; it returns
// nil for a value that is dropped.
func canonical(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if e = canonical(e); e != nil {
				out[k] = e
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		type elem struct {
			v   any
			key []byte
		}
		elems := make([]elem, 0, len(v))
		for _, e := range v {
			e = canonical(e)
			key, _ := json.Marshal(e)
			elems = append(elems, elem{e, key})
		}
		if len(elems) == 0 {
			return nil
		}
		slices.SortFunc(elems, func(a, b elem) int { return bytes.Compare(a.key, b.key) })
		out := make([]any, len(elems))
		for i, e := range elems {
			out[i] = e.v
		}
		return out
	default:
		return v
	}
}
