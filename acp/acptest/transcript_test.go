package acptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/blobhub/bhw-run/agent/agenttest"
)

// The recorded transcripts under testdata/acp are what decoder tests will
// read: each line one JSON-RPC 2.0 message with its direction, and each
// agent's park and resume runs hold the permission requests they are about.
func TestTranscripts(t *testing.T) {
	root := filepath.Join(agenttest.ModuleRoot(t), "testdata", "acp")
	for _, r := range Agents {
		for _, name := range []string{"park", "resume", "errors", "model-down", "limits"} {
			path := filepath.Join(root, r.Type, name+".jsonl")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%v; record it with: go test -tags realcli ./acp/acptest -run 'TestProbe(Limits)?$' -args -record", err)
				continue
			}
			methods := map[string]int{}
			sc := bufio.NewScanner(bytes.NewReader(b))
			sc.Buffer(nil, 4<<20)
			for n := 1; sc.Scan(); n++ {
				var l line
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					t.Fatalf("%s:%d: %v", path, n, err)
				}
				var m rpcMsg
				if err := json.Unmarshal(l.Msg, &m); err != nil || m.JSONRPC != "2.0" ||
					(l.Dir != "send" && l.Dir != "recv") || (m.Method == "" && len(m.ID) == 0) {
					t.Fatalf("%s:%d: not a JSON-RPC line with a direction: %s", path, n, sc.Bytes())
				}
				if l.Dir == "recv" && m.Method != "" {
					methods[m.Method]++
				}
			}
			if (name == "park" || name == "resume") && methods["session/request_permission"] < 2 {
				t.Errorf("%s: %d permission requests", path, methods["session/request_permission"])
			}
		}
	}
}
