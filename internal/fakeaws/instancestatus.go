package fakeaws

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// InstanceHealth is what EC2's status checks say of one instance. moto
// reports every running instance "ok" and schedules no events; a test sets
// this to play a failed check or a scheduled retirement.
type InstanceHealth struct {
	InstanceID string `json:"instanceId"`
	// InstanceStatus and SystemStatus are the checks' summaries: ok,
	// impaired, initializing, insufficient-data or not-applicable; empty
	// keeps moto's.
	InstanceStatus string           `json:"instanceStatus,omitempty"`
	SystemStatus   string           `json:"systemStatus,omitempty"`
	Events         []ScheduledEvent `json:"events,omitempty"`
	// ImpairedSince is when the impaired checks began failing, EC2's
	// impairedSince of their details. Empty: when the check was first
	// set impaired (the server's clock), kept while it stays impaired.
	ImpairedSince time.Time `json:"impairedSince,omitzero"`
}

// ScheduledEvent is an EC2 scheduled event. A description EC2 begins with
// "[Completed]" or "[Canceled]" marks one that is over.
type ScheduledEvent struct {
	// Code is instance-reboot, system-reboot, system-maintenance,
	// instance-retirement or instance-stop.
	Code        string    `json:"code"`
	Description string    `json:"description,omitempty"`
	NotBefore   time.Time `json:"notBefore,omitzero"`
}

var summaries = map[string]bool{"": true, "ok": true, "impaired": true, "initializing": true, "insufficient-data": true, "not-applicable": true}

var eventCodes = map[string]bool{"instance-reboot": true, "system-reboot": true, "system-maintenance": true, "instance-retirement": true, "instance-stop": true}

// SetInstanceHealth overrides what DescribeInstanceStatus says of an
// instance; a health with no status and no events clears the override.
func (s *Server) SetInstanceHealth(h InstanceHealth) error {
	if !strings.HasPrefix(h.InstanceID, "i-") {
		return fmt.Errorf("instanceId %q: give the ID of an instance (i-…)", h.InstanceID)
	}
	for field, v := range map[string]string{"instanceStatus": h.InstanceStatus, "systemStatus": h.SystemStatus} {
		if !summaries[v] {
			return fmt.Errorf("%s %q: use ok, impaired, initializing, insufficient-data or not-applicable", field, v)
		}
	}
	for i, e := range h.Events {
		if !eventCodes[e.Code] {
			return fmt.Errorf("events[%d].code %q: use instance-reboot, system-reboot, system-maintenance, instance-retirement or instance-stop", i, e.Code)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.InstanceStatus == "" && h.SystemStatus == "" && len(h.Events) == 0 {
		delete(s.health, h.InstanceID)
		return nil
	}
	if h.ImpairedSince.IsZero() && (h.InstanceStatus == "impaired" || h.SystemStatus == "impaired") {
		h.ImpairedSince = s.clock.Now()
		if prev, ok := s.health[h.InstanceID]; ok && !prev.ImpairedSince.IsZero() && (prev.InstanceStatus == "impaired" || prev.SystemStatus == "impaired") {
			h.ImpairedSince = prev.ImpairedSince
		}
	}
	s.health[h.InstanceID] = h
	return nil
}

func (s *Server) healthOverrides() map[string]InstanceHealth {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.health) == 0 {
		return nil
	}
	out := make(map[string]InstanceHealth, len(s.health))
	for k, v := range s.health {
		out[k] = v
	}
	return out
}

// statusFilters are DescribeInstanceStatus's filters on the checks and
// events, which moto does not implement (it fails the call); the front
// takes them out of the call and applies them to the rewritten items.
var statusFilters = []string{"instance-status.status", "system-status.status", "event.code"}

// describeInstanceStatus answers from moto, with the overridden
// instances' items rewritten and the status filters applied.
func (s *Server) describeInstanceStatus(ctx context.Context, c *call, r *http.Request) *answer {
	form := url.Values{}
	for k, v := range c.Form {
		form[k] = v
	}
	filters := formFilters(form, statusFilters...)
	for name := range filters {
		if !slices.Contains(statusFilters, name) {
			delete(filters, name)
		}
	}
	a := s.forward(ctx, r, []byte(form.Encode()))
	over := s.healthOverrides()
	if a.status != http.StatusOK || (len(over) == 0 && len(filters) == 0) {
		return a
	}
	if body, err := rewriteStatuses(a.body, over, filters); err == nil {
		a.body = body
	}
	return a
}

// statusItem is one item of DescribeInstanceStatus's instanceStatusSet,
// as EC2's query protocol writes it.
type statusItem struct {
	XMLName          xml.Name `xml:"item"`
	AvailabilityZone string   `xml:"availabilityZone"`
	InstanceID       string   `xml:"instanceId"`
	InstanceState    struct {
		Code int    `xml:"code"`
		Name string `xml:"name"`
	} `xml:"instanceState"`
	InstanceStatus statusSummary `xml:"instanceStatus"`
	SystemStatus   statusSummary `xml:"systemStatus"`
	Events         []statusEvent `xml:"eventsSet>item,omitempty"`
}

type statusSummary struct {
	Details []struct {
		Name          string `xml:"name"`
		Status        string `xml:"status"`
		ImpairedSince string `xml:"impairedSince,omitempty"`
	} `xml:"details>item"`
	Status string `xml:"status"`
}

type statusEvent struct {
	Code        string `xml:"code"`
	Description string `xml:"description,omitempty"`
	NotBefore   string `xml:"notBefore,omitempty"`
}

func (h InstanceHealth) apply(it *statusItem) {
	set := func(sum *statusSummary, status string) {
		if status == "" {
			return
		}
		sum.Status = status
		check := map[string]string{"ok": "passed", "impaired": "failed", "initializing": "initializing", "insufficient-data": "insufficient-data"}[status]
		for i := range sum.Details {
			if check != "" {
				sum.Details[i].Status = check
			}
			sum.Details[i].ImpairedSince = ""
			if check == "failed" {
				sum.Details[i].ImpairedSince = h.ImpairedSince.UTC().Format("2006-01-02T15:04:05.000Z")
			}
		}
	}
	set(&it.InstanceStatus, h.InstanceStatus)
	set(&it.SystemStatus, h.SystemStatus)
	it.Events = nil
	for _, e := range h.Events {
		ev := statusEvent{Code: e.Code, Description: e.Description}
		if !e.NotBefore.IsZero() {
			ev.NotBefore = e.NotBefore.UTC().Format("2006-01-02T15:04:05.000Z")
		}
		it.Events = append(it.Events, ev)
	}
}

// passes reports whether an item passes the status filters: each filter
// name must match one of its values.
func (it statusItem) passes(filters map[string][]string) bool {
	for name, values := range filters {
		var have []string
		switch name {
		case "instance-status.status":
			have = []string{it.InstanceStatus.Status}
		case "system-status.status":
			have = []string{it.SystemStatus.Status}
		case "event.code":
			for _, e := range it.Events {
				have = append(have, e.Code)
			}
		}
		if !slices.ContainsFunc(have, func(v string) bool { return slices.Contains(values, v) }) {
			return false
		}
	}
	return true
}

// rewriteStatuses replaces the overridden instances' items and drops the
// items the filters refuse, keeping every other byte as moto wrote it.
func rewriteStatuses(body []byte, over map[string]InstanceHealth, filters map[string][]string) ([]byte, error) {
	var out bytes.Buffer
	var stack []string
	prev, start := int64(0), int64(0)
	dec := xml.NewDecoder(bytes.NewReader(body))
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			stack = append(stack, t.Name.Local)
			if strings.HasSuffix(strings.Join(stack, "/"), "DescribeInstanceStatusResponse/instanceStatusSet/item") {
				start = before
			}
		case xml.EndElement:
			if strings.HasSuffix(strings.Join(stack, "/"), "DescribeInstanceStatusResponse/instanceStatusSet/item") {
				end := dec.InputOffset()
				var it statusItem
				if err := xml.Unmarshal(body[start:end], &it); err != nil {
					return nil, err
				}
				h, ok := over[it.InstanceID]
				if ok {
					h.apply(&it)
				}
				switch {
				case !it.passes(filters):
					out.Write(body[prev:start])
					prev = end
				case ok:
					item, err := xml.Marshal(it)
					if err != nil {
						return nil, err
					}
					out.Write(body[prev:start])
					out.Write(item)
					prev = end
				}
			}
			stack = stack[:len(stack)-1]
		}
	}
	out.Write(body[prev:])
	return out.Bytes(), nil
}
