package viewer

import (
	tea "charm.land/bubbletea/v2"
)

// Model is the Bubble Tea model: the latest snapshot and what the user
// toggled. All drawing is Render's.
type Model struct {
	snap    *Snapshot
	view    View
	width   int
	style   Style
	waiting string
}

// NewModel starts with no snapshot; waiting is shown until the first.
func NewModel(style Style, waiting string) Model {
	return Model{style: style, waiting: waiting, width: 80}
}

// SnapshotMsg delivers a new snapshot to the program.
type SnapshotMsg Snapshot

// Init implements tea.Model.
func (m Model) Init() tea.Cmd { return nil }

// Update implements tea.Model.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.view.Height = msg.Width, msg.Height
	case SnapshotMsg:
		s := Snapshot(msg)
		m.snap = &s
	case tea.KeyPressMsg:
		switch msg.String() {
		case "q", "esc", "ctrl+c":
			return m, tea.Quit
		case "d":
			m.view.ShowDisruption = !m.view.ShowDisruption
		case "p":
			m.view.ShowPending = !m.view.ShowPending
		case "left", "h", "pgup":
			m.view.Page = max(m.view.Page-1, 0)
		case "right", "l", "pgdown":
			if m.snap != nil {
				m.view.Page = min(m.view.Page+1, Pages(*m.snap, m.view, m.width)-1)
			}
		}
	}
	return m, nil
}

// View implements tea.Model.
func (m Model) View() tea.View {
	text := m.waiting + "\n"
	if m.snap != nil {
		text = Render(*m.snap, m.view, m.width, m.style)
	}
	v := tea.NewView(text)
	v.AltScreen = true
	return v
}
