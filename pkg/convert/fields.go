package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// fields hands out the fields of one block of an input object, so that any
// field no mapping took is reported rather than silently lost.
type fields struct {
	c    *converter
	ref  string
	path string
	m    map[string]any
}

func (c *converter) fields(ref, path string, v any) *fields {
	m, _ := v.(map[string]any)
	if m == nil && v != nil {
		c.unmappable(ref, path, fmt.Sprintf("want an object, got %T", v))
	}
	return &fields{c: c, ref: ref, path: path, m: m}
}

func (f *fields) field(key string) string {
	if f.path == "" {
		return key
	}
	return f.path + "." + key
}

// has reports whether key is set (and not null).
func (f *fields) has(key string) bool { return f.m[key] != nil }

// raw takes key as it is.
func (f *fields) raw(key string) any {
	v := f.m[key]
	delete(f.m, key)
	return v
}

// sub takes key as a nested block.
func (f *fields) sub(key string) *fields {
	return f.c.fields(f.ref, f.field(key), f.raw(key))
}

// take decodes key into into, strictly: an unknown nested field is a typo
// or a field of another version, and is reported. It reports whether key
// was set and decoded.
func (f *fields) take(key string, into any) bool {
	v := f.raw(key)
	if v == nil {
		return false
	}
	if err := decodeStrict(v, into); err != nil {
		f.c.unmappable(f.ref, f.field(key), err.Error())
		return false
	}
	return true
}

// rest reports every field nobody took.
func (f *fields) rest(what string) {
	for _, k := range slices.Sorted(maps.Keys(f.m)) {
		f.c.unmappable(f.ref, f.field(k), "not a field of "+what+"; remove it")
	}
}

func decodeStrict(v, into any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}
