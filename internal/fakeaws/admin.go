package fakeaws

import (
	"encoding/json"
	"net/http"
)

// Alias is a mutable public image parameter and the image it points at.
type Alias struct {
	Parameter string `json:"parameter"`
	ImageID   string `json:"imageId"`
	ImageName string `json:"imageName"`
	Family    string `json:"family"`
	Arch      string `json:"arch"`
	Version   int64  `json:"version"`
}

// Aliases lists the mutable image parameters, by name.
func (s *Server) Aliases() []Alias {
	s.images.mu.Lock()
	defer s.images.mu.Unlock()
	out := make([]Alias, 0, len(s.images.aliases))
	for _, name := range sortedMapKeys(s.images.aliases) {
		a := s.images.aliases[name]
		out = append(out, Alias{Parameter: name, ImageID: a.image.ID, ImageName: a.image.Name, Family: string(a.family), Arch: a.arch, Version: s.images.params[name].Version})
	}
	return out
}

// admin serves the endpoint's own API under /_fake/ (see docs/fake-aws.md).
func (s *Server) admin(w http.ResponseWriter, r *http.Request) {
	bad := func(err error) { writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()}) }
	switch route := r.Method + " " + r.URL.Path; route {
	case "GET /_fake/healthz":
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case "GET /_fake/calls":
		calls := s.Calls(r.URL.Query().Get("service"), r.URL.Query().Get("action"))
		if calls == nil {
			calls = []Call{}
		}
		writeJSON(w, http.StatusOK, calls)
	case "DELETE /_fake/calls":
		s.ResetCalls()
		w.WriteHeader(http.StatusNoContent)
	case "GET /_fake/faults":
		writeJSON(w, http.StatusOK, s.Faults())
	case "PUT /_fake/faults":
		var f Faults
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			bad(err)
			return
		}
		if err := s.SetFaults(f); err != nil {
			bad(err)
			return
		}
		writeJSON(w, http.StatusOK, s.Faults())
	case "GET /_fake/images":
		writeJSON(w, http.StatusOK, s.Aliases())
	case "POST /_fake/images/publish":
		var in struct {
			Parameter string `json:"parameter"`
			ImageID   string `json:"imageId"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			bad(err)
			return
		}
		out, err := s.PublishImage(r.Context(), in.Parameter, in.ImageID)
		if err != nil {
			bad(err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	case "GET /_fake/boots":
		boots := s.Boots()
		if boots == nil {
			boots = []Boot{}
		}
		writeJSON(w, http.StatusOK, boots)
	case "POST /_fake/kubelet/kill":
		var in struct {
			InstanceID string `json:"instanceId"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			bad(err)
			return
		}
		boot, err := s.KillKubelet(r.Context(), in.InstanceID)
		if err != nil {
			bad(err)
			return
		}
		writeJSON(w, http.StatusOK, boot)
	case "PUT /_fake/instance-status":
		var in InstanceHealth
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			bad(err)
			return
		}
		if err := s.SetInstanceHealth(in); err != nil {
			bad(err)
			return
		}
		writeJSON(w, http.StatusOK, in)
	case "PUT /_fake/spot-prices":
		var in struct {
			InstanceType string  `json:"instanceType"`
			Price        float64 `json:"price"`
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			bad(err)
			return
		}
		if err := s.SetSpotPrice(in.InstanceType, in.Price); err != nil {
			bad(err)
			return
		}
		writeJSON(w, http.StatusOK, in)
	case "GET /_fake/seed":
		writeJSON(w, http.StatusOK, s.Seed())
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no admin route " + route + "; see docs/fake-aws.md"})
	}
}
