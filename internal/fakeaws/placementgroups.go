package fakeaws

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// moto has no placement groups: CreatePlacementGroup,
// DescribePlacementGroups and DeletePlacementGroup are answered here, a
// launch template's Placement is honoured by CreateFleet (an unknown group
// fails the call, as EC2 fails it), and DescribeInstances shows each
// instance's group and partition.

type placementGroup struct {
	id, name, strategy string
	partitions         int32
	// members are the instances launched into the group, with their
	// partition (0 outside a partition group).
	members map[string]int32
	next    int32
}

type placementGroups struct {
	mu     sync.Mutex
	byName map[string]*placementGroup
}

func (p *placementGroups) find(nameOrID string) *placementGroup {
	if g := p.byName[nameOrID]; g != nil {
		return g
	}
	for _, g := range p.byName {
		if g.id == nameOrID {
			return g
		}
	}
	return nil
}

func (g *placementGroup) xml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "<groupName>%s</groupName><groupId>%s</groupId><strategy>%s</strategy><state>available</state>", xmlEscape(g.name), g.id, g.strategy)
	if g.strategy == "partition" {
		fmt.Fprintf(&b, "<partitionCount>%d</partitionCount>", g.partitions)
	}
	return b.String()
}

const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

func (s *Server) createPlacementGroup(c *call) *answer {
	name, strategy := c.Form.Get("GroupName"), c.Form.Get("Strategy")
	if name == "" {
		return errorAnswer(c, awsError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter GroupName", true})
	}
	if strategy == "" {
		strategy = "cluster"
	}
	if strategy != "cluster" && strategy != "spread" && strategy != "partition" {
		return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter strategy is invalid. Valid values are cluster, spread, partition.", strategy), true})
	}
	var partitions int32
	if strategy == "partition" {
		partitions = 2
		if v := c.Form.Get("PartitionCount"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 7 {
				return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidParameterValue", "The partition count must be between 1 and 7.", true})
			}
			partitions = int32(n)
		}
	}
	s.pgs.mu.Lock()
	defer s.pgs.mu.Unlock()
	if s.pgs.byName == nil {
		s.pgs.byName = map[string]*placementGroup{}
	}
	if s.pgs.byName[name] != nil {
		return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidPlacementGroup.Duplicate", fmt.Sprintf("The placement group '%s' already exists.", name), true})
	}
	raw := make([]byte, 9)
	_, _ = rand.Read(raw)
	g := &placementGroup{id: "pg-" + hex.EncodeToString(raw)[:17], name: name, strategy: strategy, partitions: partitions, members: map[string]int32{}}
	s.pgs.byName[name] = g
	return xmlAnswer(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<CreatePlacementGroupResponse xmlns="%s"><requestId>%s</requestId><return>true</return><placementGroup>%s</placementGroup></CreatePlacementGroupResponse>`, ec2Namespace, newRequestID(), g.xml()))
}

func (s *Server) describePlacementGroups(c *call) *answer {
	var names, ids []string
	for k, v := range c.Form {
		switch {
		case strings.HasPrefix(k, "GroupName."):
			names = append(names, v[0])
		case strings.HasPrefix(k, "GroupId."):
			ids = append(ids, v[0])
		}
	}
	s.pgs.mu.Lock()
	defer s.pgs.mu.Unlock()
	var out []*placementGroup
	for _, want := range append(names, ids...) {
		g := s.pgs.find(want)
		if g == nil || (g.id == want) != strings.HasPrefix(want, "pg-") {
			if strings.HasPrefix(want, "pg-") {
				return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidPlacementGroupId.Malformed", fmt.Sprintf("The placement group ID '%s' is malformed or does not exist.", want), true})
			}
			return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidPlacementGroup.Unknown", fmt.Sprintf("The Placement Group '%s' is unknown.", want), true})
		}
		out = append(out, g)
	}
	if len(names)+len(ids) == 0 {
		for _, g := range s.pgs.byName {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	var b strings.Builder
	for _, g := range out {
		b.WriteString("<item>" + g.xml() + "</item>")
	}
	return xmlAnswer(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<DescribePlacementGroupsResponse xmlns="%s"><requestId>%s</requestId><placementGroupSet>%s</placementGroupSet></DescribePlacementGroupsResponse>`, ec2Namespace, newRequestID(), b.String()))
}

func (s *Server) deletePlacementGroup(c *call) *answer {
	name := c.Form.Get("GroupName")
	s.pgs.mu.Lock()
	defer s.pgs.mu.Unlock()
	if s.pgs.byName[name] == nil {
		return errorAnswer(c, awsError{http.StatusBadRequest, "InvalidPlacementGroup.Unknown", fmt.Sprintf("The Placement Group '%s' is unknown.", name), true})
	}
	delete(s.pgs.byName, name)
	return xmlAnswer(fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<DeletePlacementGroupResponse xmlns="%s"><requestId>%s</requestId><return>true</return></DeletePlacementGroupResponse>`, ec2Namespace, newRequestID()))
}

// templatePlacementGroup is the group a launch template version names, by
// id or name, and the partition it asks for (0: EC2's choice); nil for
// none. A name or id no group has is an error EC2 gives at launch.
func (s *Server) templatePlacementGroup(ctx context.Context, template, name, version string) (*placementGroup, int32, error) {
	data := s.templateData(ctx, template, name, version)
	if data == nil {
		return nil, 0, nil
	}
	p := data.Placement
	if p == nil || (aws.ToString(p.GroupId) == "" && aws.ToString(p.GroupName) == "") {
		return nil, 0, nil
	}
	want := aws.ToString(p.GroupId)
	if want == "" {
		want = aws.ToString(p.GroupName)
	}
	s.pgs.mu.Lock()
	defer s.pgs.mu.Unlock()
	if g := s.pgs.find(want); g != nil {
		return g, aws.ToInt32(p.PartitionNumber), nil
	}
	return nil, 0, fmt.Errorf("The specified placement group %s does not exist.", want)
}

// joinPlacementGroup records an instance in its group, in the partition
// its template asked for; EC2 spreads the others over the partitions.
func (s *Server) joinPlacementGroup(g *placementGroup, instance string, partition int32) {
	s.pgs.mu.Lock()
	defer s.pgs.mu.Unlock()
	if g.strategy != "partition" {
		partition = 0
	} else if partition == 0 {
		partition = g.next%g.partitions + 1
		g.next++
	}
	g.members[instance] = partition
}

// withPlacement writes the groups of the instances in a DescribeInstances
// answer into their placement elements, where moto leaves groupName empty.
func (s *Server) withPlacement(body []byte) []byte {
	s.pgs.mu.Lock()
	defer s.pgs.mu.Unlock()
	for _, g := range s.pgs.byName {
		for id, partition := range g.members {
			at := bytes.Index(body, []byte("<instanceId>"+id+"</instanceId>"))
			if at < 0 {
				continue
			}
			rel := bytes.Index(body[at:], []byte("<placement>"))
			if rel < 0 {
				continue
			}
			start := at + rel + len("<placement>")
			fill := "<groupName>" + xmlEscape(g.name) + "</groupName><groupId>" + g.id + "</groupId>"
			if partition > 0 {
				fill += fmt.Sprintf("<partitionNumber>%d</partitionNumber>", partition)
			}
			rest := body[start:]
			if bytes.HasPrefix(rest, []byte("<groupName/>")) {
				rest = rest[len("<groupName/>"):]
			}
			body = append(append(append([]byte{}, body[:start]...), fill...), rest...)
		}
	}
	return body
}
