package deploy

import "time"

// EventType says what happened.
type EventType string

// Event types, in the order a wave produces them.
const (
	WaveStarted   EventType = "WaveStarted"
	PluginApplied EventType = "PluginApplied"
	ObjectReady   EventType = "ObjectReady"
	// ObjectWaiting says what a plugin's wait for readiness waits on: the first
	// of its objects not ready yet (Object) and why (Message), with how many are
	// Ready of Total. It is sent when that object or its reason changes, not at
	// every poll.
	ObjectWaiting EventType = "ObjectWaiting"
	PluginReady   EventType = "PluginReady"
	PluginPruned  EventType = "PluginPruned"
	// ObjectKept: an object a prune, uninstall or rollback would delete was
	// left in the cluster (Object) because it is annotated
	// helm.sh/resource-policy: keep, as Helm leaves it.
	ObjectKept   EventType = "ObjectKept"
	PluginFailed EventType = "PluginFailed"
	// PluginInterrupted: the run was cancelled (Ctrl-C, SIGTERM) before the
	// plugin was ready; its revision is recorded Interrupted, and a re-run
	// continues it.
	PluginInterrupted EventType = "PluginInterrupted"
	WaveFinished      EventType = "WaveFinished"
	PluginRemoved     EventType = "PluginRemoved"
	UninstallFailed   EventType = "UninstallFailed"
)

// Event types of what happens around the waves.
const (
	// LeaseWaiting: another run holds the cluster's operation lease (Holder,
	// Operation, Expires) and this one waits for it; sent when the wait starts
	// and every 10 seconds of it.
	LeaseWaiting EventType = "LeaseWaiting"
	// LeaseTaken: the lease this run waited for is its own now.
	LeaseTaken EventType = "LeaseTaken"
	// APIRetrying: the API server (Server) did not answer a request, which is
	// retried: try Attempt of at most Attempts failed with Message. Sent at most
	// once a second for the whole client.
	APIRetrying EventType = "APIRetrying"
	// APIRetried ends the retries an APIRetrying announced: Message says
	// whether the server answered or the request gave up.
	APIRetried EventType = "APIRetried"
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
	// Holder (host/pid) and Operation name the run holding the cluster's
	// operation lease, and Expires when its lease runs out unless renewed
	// (LeaseWaiting, LeaseTaken).
	Holder    string    `json:"holder,omitempty"`
	Operation string    `json:"operation,omitempty"`
	Expires   time.Time `json:"expires,omitzero"`
	// Server is the API server a request is retried against; Attempt and
	// Attempts say which try failed, of how many (APIRetrying, APIRetried).
	Server   string `json:"server,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
}
