package fakeaws

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"
)

// launch is what the endpoint remembers of an instance it saw launched.
type launch struct {
	at time.Time
	// template and version are the launch template CreateFleet used: moto
	// does not apply a fleet template's block device mappings, so the root
	// volume's size is read from the template.
	template, version string
}

func (s *Server) recordLaunch(id, template, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.launches[id] = launch{at: s.clock.Now(), template: template, version: version}
}

func (s *Server) launchOf(id string) (launch, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.launches[id]
	return l, ok
}

// hidden lists the instances still inside the DescribeDelay window.
func (s *Server) hidden(delay time.Duration) map[string]bool {
	if delay <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	out := map[string]bool{}
	for id, l := range s.launches {
		if now.Sub(l.at) < delay {
			out[id] = true
		}
	}
	return out
}

// describeInstances applies eventual consistency to DescribeInstances: an
// instance launched less than DescribeDelay ago is left out of the answer,
// and asking for it by ID fails with InvalidInstanceID.NotFound, as EC2
// does right after a launch.
func (s *Server) describeInstances(ctx context.Context, c *call, r *http.Request) *answer {
	hide := s.hidden(s.faults.get().DescribeDelay.Duration)
	if len(hide) == 0 {
		a := s.forward(ctx, r, c.Body)
		if a.status == http.StatusOK {
			a.body = s.withReservations(s.withPlacement(a.body))
		}
		return a
	}
	var missing []string
	for k, v := range c.Form {
		if strings.HasPrefix(k, "InstanceId.") && hide[v[0]] {
			missing = append(missing, v[0])
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		ids := "'" + strings.Join(missing, "', '") + "'"
		msg := fmt.Sprintf("The instance ID %s does not exist", ids)
		if len(missing) > 1 {
			msg = fmt.Sprintf("The instance IDs %s do not exist", ids)
		}
		a := errorAnswer(c, awsError{http.StatusBadRequest, "InvalidInstanceID.NotFound", msg, true})
		a.fault = faultDescribe
		return a
	}
	a := s.forward(ctx, r, c.Body)
	if a.status != http.StatusOK {
		return a
	}
	body, removed, err := dropInstances(a.body, hide)
	if err == nil && removed {
		a.body, a.fault = body, faultDescribe
	}
	a.body = s.withReservations(s.withPlacement(a.body))
	return a
}

// dropInstances removes the hidden instances' items from a
// DescribeInstances answer, and reservations left without instances,
// keeping every other byte as moto wrote it.
func dropInstances(body []byte, hide map[string]bool) ([]byte, bool, error) {
	type span struct{ start, end int64 }
	var (
		cut   []span
		stack []string
		// Per open reservation item and instance item: where it starts,
		// whether it is hidden, and how many instances it keeps.
		resStart, instStart  int64
		instHidden           bool
		resKept, resInstance int
	)
	dec := xml.NewDecoder(bytes.NewReader(body))
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, false, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			stack = append(stack, t.Name.Local)
			p := strings.Join(stack, "/")
			switch {
			case strings.HasSuffix(p, "DescribeInstancesResponse/reservationSet/item"):
				resStart, resKept, resInstance = before, 0, 0
			case strings.HasSuffix(p, "reservationSet/item/instancesSet/item"):
				instStart, instHidden = before, false
				resInstance++
			}
		case xml.CharData:
			if strings.HasSuffix(strings.Join(stack, "/"), "reservationSet/item/instancesSet/item/instanceId") && hide[strings.TrimSpace(string(t))] {
				instHidden = true
			}
		case xml.EndElement:
			p := strings.Join(stack, "/")
			switch {
			case strings.HasSuffix(p, "reservationSet/item/instancesSet/item"):
				if instHidden {
					cut = append(cut, span{instStart, dec.InputOffset()})
				} else {
					resKept++
				}
			case strings.HasSuffix(p, "DescribeInstancesResponse/reservationSet/item"):
				if resInstance > 0 && resKept == 0 {
					// Drop the whole reservation, and the instance spans in it.
					for len(cut) > 0 && cut[len(cut)-1].start >= resStart {
						cut = cut[:len(cut)-1]
					}
					cut = append(cut, span{resStart, dec.InputOffset()})
				}
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(cut) == 0 {
		return body, false, nil
	}
	var out bytes.Buffer
	prev := int64(0)
	for _, c := range cut {
		out.Write(body[prev:c.start])
		prev = c.end
	}
	out.Write(body[prev:])
	return out.Bytes(), true, nil
}
