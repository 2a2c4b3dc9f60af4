package framework

import (
	"bufio"
	"encoding/json"
	"strings"
	"time"
)

// LogLine is one of the controller's JSON log lines, with the fields the
// tests read the order of events from: when, what, and the Node or
// NodeClaim it is about.
type LogLine struct {
	Time      time.Time         `json:"time"`
	Message   string            `json:"message"`
	Node      map[string]string `json:"Node"`
	NodeClaim map[string]string `json:"NodeClaim"`
	Reason    string            `json:"reason"`
}

// ParseLogs reads the controller's log lines; lines that are not JSON are
// skipped.
func ParseLogs(logs string) []LogLine {
	var out []LogLine
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var l LogLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// FirstAbout is when msg was first logged about the Node or NodeClaim
// name; zero when it has not been.
func FirstAbout(lines []LogLine, msg, name string) time.Time {
	for _, l := range lines {
		if l.Message == msg && (l.Node["name"] == name || l.NodeClaim["name"] == name) {
			return l.Time
		}
	}
	return time.Time{}
}
