package fakeaws

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
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

// describeInstanceStatus answers from moto, with the overridden
// instances' items rewritten.
func (s *Server) describeInstanceStatus(ctx context.Context, c *call, r *http.Request) *answer {
	a := s.forward(ctx, r, c.Body)
	over := s.healthOverrides()
	if a.status != http.StatusOK || len(over) == 0 {
		return a
	}
	if body, err := rewriteStatuses(a.body, over); err == nil {
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
		Name   string `xml:"name"`
		Status string `xml:"status"`
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

// rewriteStatuses replaces the overridden instances' items, keeping every
// other byte as moto wrote it.
func rewriteStatuses(body []byte, over map[string]InstanceHealth) ([]byte, error) {
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
				if h, ok := over[it.InstanceID]; ok {
					h.apply(&it)
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
