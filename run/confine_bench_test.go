package run

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blobhub/bhw-run/setup"
)

// BenchmarkOtherThreadFolders is what a confined start pays to learn the
// other threads' work folders and agent homes, at 100, 1,000 and 10,000
// threads (a recorded codex thread of ~1.3 KB each): cold decodes every
// thread.yaml (no cache, as the first start after an upgrade), warm finds
// them all in the cache (as every start after, but for the threads whose
// thread.yaml changed since).
func BenchmarkOtherThreadFolders(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		for _, warm := range []bool{false, true} {
			name := fmt.Sprintf("%d/cold", n)
			if warm {
				name = fmt.Sprintf("%d/warm", n)
			}
			b.Run(name, func(b *testing.B) {
				state := benchStateTree(b, n)
				cache := filepath.Join(state, "cache", threadFoldersFile)
				otherThreadFolders(state)
				b.ResetTimer()
				for range b.N {
					if !warm {
						b.StopTimer()
						if err := os.Remove(cache); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
					if got := otherThreadFolders(state); len(got) != 2*n {
						b.Fatalf("%d folders, want %d", len(got), 2*n)
					}
				}
			})
		}
	}
}

// benchStateTree is a state tree of n threads in ten projects.
func benchStateTree(b *testing.B, n int) string {
	state := b.TempDir()
	job := filepath.Join(state, "jobs", setup.JobType+"-ses_bench")
	for i := range n {
		dir := setup.ThreadDir(job, fmt.Sprintf("projects/p%d/t%d", i%10, i))
		if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
			b.Fatal(err)
		}
		body := strings.ReplaceAll(benchThreadYAML, "@N@", fmt.Sprint(i))
		if err := os.WriteFile(filepath.Join(dir, "thread.yaml"), []byte(body), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	return state
}

const benchThreadYAML = `alias: projects/p1/t@N@
session:
    revision_id: rev_test
    session_id: ses_bench
workspace:
    agent_type: codex
    work_folder: /srv/work/t@N@
    resolved_work_folder: /srv/work/t@N@
agent:
    state: active
    agent_session_id: 019a0000-0000-7000-8000-00000000c0de
    failed_on_wire: false
    resolved:
        executable: /usr/local/bin/codex
        model: gpt-5.1-codex
        effort: high
        permissions: approval
        agent_home: /srv/homes/t@N@
turn:
    state: idle
    started_at: "2026-12-01T09:39:36.590984+00:00"
    inbound_ids:
        - itm_cb47d660a79bdd8c8dd5
grants: []
items:
    last_consumed:
        item_id: itm_cb47d660a79bdd8c8dd5
        created_at: "2026-12-01T09:39:36.575645+00:00"
    last_posted:
        item_id: itm_3848486903a9f6f540e3
        created_at: "2026-12-01T09:39:36.597097+00:00"
    scanned:
        created_at: "2026-12-01T09:39:36.597097+00:00"
        ids:
            - itm_3848486903a9f6f540e3
    pending_inbound: []
emission_nonce: 96e75a161898934b
outbox:
    created_by_us: false
artifacts: {}
`
