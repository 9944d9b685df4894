package envelope

import (
	"gopkg.in/yaml.v3"

	"github.com/blobhub/bhw-run/policy"
)

// GrantApprove is the one verdict a Grant carries: a person's denial
// records no grant.
const GrantApprove = "approve"

// Grant is blobhub-worker's one-shot grant, agent.grant in thread.yaml: a
// person approved an approval, and the call it names runs once without
// asking again. Both sides write it and spend it, so a thread whose person
// answered under one is resumed by the other without the question coming
// back.
type Grant struct {
	// Subject is the tool (or the request method) the grant belongs to.
	Subject string `yaml:"subject"`
	// Verdict is always GrantApprove.
	Verdict string `yaml:"verdict"`
	// GrantedBy is the prompt_id of the answered prompt.
	GrantedBy string `yaml:"granted_by"`
	// GrantKey is which call it covers: the subject, a colon and what the
	// call acts on (its command, else its file, else its path). Empty in a
	// grant of a question that named no call: the subject alone then
	// matches.
	GrantKey string `yaml:"grant_key"`
	// Extra keeps keys this version does not know.
	Extra map[string]any `yaml:",inline"`
}

// diskThread is Thread as it is encoded: the same fields, without the
// methods that move the prompt.
type diskThread Thread

// MarshalYAML writes the open prompt at agent.park, where blobhub-worker
// reads a parked thread's question from (its prompt_id, kind and subject;
// the rest of the record it ignores), and nothing under the older prompt
// key.
func (t Thread) MarshalYAML() (any, error) {
	d := diskThread(t)
	if p := t.Prompt; p != nil {
		park := *p
		if park.Subject == "" && park.Kind != policy.KindAskUserQuestion {
			park.Subject = park.Call.Tool
		}
		d.Agent.Park = &park
	}
	d.Prompt = nil
	return d, nil
}

// UnmarshalYAML reads the open prompt from agent.park, or from the prompt
// key of a thread.yaml an earlier bhw-run wrote, into Prompt. A park the
// daemon wrote names only the prompt (prompt_id, kind, subject): run reads
// the rest from the thread's items.
func (t *Thread) UnmarshalYAML(n *yaml.Node) error {
	var d diskThread
	err := n.Decode(&d)
	*t = Thread(d)
	if t.Agent.Park != nil {
		t.Prompt, t.Agent.Park = t.Agent.Park, nil
	}
	return err
}
