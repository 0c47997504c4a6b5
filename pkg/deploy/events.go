package deploy

import "time"

// EventType says what happened.
type EventType string

// Event types, in the order a wave produces them.
const (
	WaveStarted   EventType = "WaveStarted"
	PluginApplied EventType = "PluginApplied"
	ObjectReady   EventType = "ObjectReady"
	PluginReady   EventType = "PluginReady"
	PluginPruned  EventType = "PluginPruned"
	PluginFailed  EventType = "PluginFailed"
	// PluginInterrupted: the run was cancelled (Ctrl-C, SIGTERM) before the
	// plugin was ready; its revision is recorded Interrupted, and a re-run
	// continues it.
	PluginInterrupted EventType = "PluginInterrupted"
	WaveFinished      EventType = "WaveFinished"
	PluginRemoved     EventType = "PluginRemoved"
	UninstallFailed   EventType = "UninstallFailed"
)

// Event is one step of progress, for terminals and for machines (-o json).
type Event struct {
	Time   time.Time `json:"time"`
	Type   EventType `json:"type"`
	Wave   int       `json:"wave"`
	Plugin string    `json:"plugin,omitempty"`
	Object string    `json:"object,omitempty"`
	// Applied, Ready and Total count the plugin's objects (or the wave's, for wave events).
	Applied int    `json:"applied,omitempty"`
	Ready   int    `json:"ready,omitempty"`
	Total   int    `json:"total,omitempty"`
	Message string `json:"message,omitempty"`
}
