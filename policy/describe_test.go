package policy

import "testing"

func TestSummary(t *testing.T) {
	if got := Summary("Bash", Target{Command: "rm  -rf\nbuild"}); got != "Bash → rm -rf build" {
		t.Errorf("got %q", got)
	}
	if got := Summary("Write", Target{Paths: []string{"/abs/x.txt"}}); got != "Write → /abs/x.txt" {
		t.Errorf("got %q", got)
	}
	if got := Summary("Task", Target{}); got != "Task" {
		t.Errorf("got %q", got)
	}
}
