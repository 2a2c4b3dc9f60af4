package viewer

import (
	"fmt"
	"image/color"
	"regexp"
	"strconv"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"
)

// DefaultStyle is --style's default, eks-node-viewer's colours.
const DefaultStyle = "#04B575,#FFFF00,#FF0000"

// Thresholds of --style's colours, as eks-node-viewer applies them to a
// percentage of requests over allocatable: above OKAbove it is "ok", above
// BadAbove "bad", otherwise "good".
const (
	OKAbove  = 60.0
	BadAbove = 90.0
)

// Style is --style: three colours for "good", "ok" and "bad" values. A
// percentage takes the colour of its threshold; a bar fades from the bad
// colour at its empty end to the good one at its full end, so a full node
// reads as well packed, as in eks-node-viewer.
type Style struct {
	good, ok, bad color.Color
	// plain renders no colour at all: the goldens, and terminals without it.
	plain bool
}

var hexColour = regexp.MustCompile(`^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`)

// ParseStyle reads --style, "good,ok,bad", each a hex colour (#04B575) or an
// ANSI colour number (0-255). Under colorprofile.NoTTY or Ascii nothing is
// coloured, which keeps rendered text comparable.
func ParseStyle(s string, profile colorprofile.Profile) (Style, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return Style{}, fmt.Errorf("--style %q: give three colours, for good, ok and bad values, such as %q; found %d", s, DefaultStyle, len(parts))
	}
	var cs [3]color.Color
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if n, err := strconv.Atoi(p); err == nil {
			if n < 0 || n > 255 {
				return Style{}, fmt.Errorf("--style %q: ANSI colour %d is out of range 0-255; use a number in range or a hex colour such as #04B575", s, n)
			}
		} else if !hexColour.MatchString(p) {
			return Style{}, fmt.Errorf("--style %q: %q is not a colour; use a hex colour such as #04B575 or an ANSI colour number 0-255", s, p)
		}
		cs[i] = lipgloss.Color(p)
	}
	// Colours are written in full; Bubble Tea downsamples them to what the
	// terminal supports.
	return Style{good: cs[0], ok: cs[1], bad: cs[2], plain: profile <= colorprofile.Ascii}, nil
}

// PlainStyle renders without colour.
func PlainStyle() Style {
	st, _ := ParseStyle(DefaultStyle, colorprofile.NoTTY)
	return st
}

func (s Style) paint(c color.Color, text string) string {
	if s.plain || text == "" {
		return text
	}
	return lipgloss.NewStyle().Foreground(c).Render(text)
}

// Good, OK and Bad colour text.
func (s Style) Good(text string) string { return s.paint(s.good, text) }
func (s Style) OK(text string) string   { return s.paint(s.ok, text) }
func (s Style) Bad(text string) string  { return s.paint(s.bad, text) }

// Percent colours a percentage by the thresholds.
func (s Style) Percent(pct float64) string {
	text := fmt.Sprintf("%5.1f%%", pct)
	switch {
	case pct > BadAbove:
		return s.Bad(text)
	case pct > OKAbove:
		return s.OK(text)
	}
	return s.Good(text)
}

// Bar draws fraction (0..1) in width cells.
func (s Style) Bar(fraction float64, width int) string {
	if width <= 0 {
		return ""
	}
	if fraction < 0 {
		fraction = 0
	}
	if fraction > 1 {
		fraction = 1
	}
	full := int(fraction*float64(width) + 0.5)
	var b strings.Builder
	if s.plain {
		b.WriteString(strings.Repeat("█", full))
	} else {
		ramp := lipgloss.Blend1D(width, s.bad, s.good)
		for i := 0; i < full; i++ {
			b.WriteString(lipgloss.NewStyle().Foreground(ramp[i]).Render("█"))
		}
	}
	b.WriteString(strings.Repeat("░", width-full))
	return b.String()
}

// Faint is for help and notes.
func (s Style) Faint(text string) string {
	if s.plain {
		return text
	}
	return lipgloss.NewStyle().Foreground(lipgloss.Color("#626262")).Render(text)
}
