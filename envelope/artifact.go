package envelope

import "encoding/json"

// Artifact is the artifact block of an artifact object, the value bhw-run
// uploads at <thread alias>/artifacts/<path> for each file of the outbox.
// The blobhub-worker documentation has no artifact objects: the shape is
// bhw-run's own, kept here with the other wire shapes.
type Artifact struct {
	Name      string `json:"name"`
	Path      string `json:"path"`
	MediaType string `json:"media_type"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	Encoding  string `json:"encoding,omitempty"` // utf-8 | base64
	Data      string `json:"data,omitempty"`
	Thread    string `json:"thread"`
}

// Value is the artifact object: {type: artifact, artifact: {…}}.
func (a Artifact) Value() json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "artifact", "artifact": a})
	return b
}
