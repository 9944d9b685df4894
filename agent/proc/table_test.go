package proc

import (
	"encoding/binary"
	"slices"
	"testing"
)

func pids(ps []procStat) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.pid)
	}
	slices.Sort(out)
	return out
}

// fakeTable: bhw-run (100) runs an agent (200, group 200) with a tool in
// its group (201) and one in a session of its own (300) that has a child
// (301); 202 is an exited, unreaped child of the agent with a live child
// of its own (302, no longer below anything); 400 is a stranger.
var fakeTable = []procStat{
	{pid: 1, ppid: 0, pgrp: 1},
	{pid: 100, ppid: 1, pgrp: 100},
	{pid: 200, ppid: 100, pgrp: 200},
	{pid: 201, ppid: 200, pgrp: 200},
	{pid: 202, ppid: 200, pgrp: 200, zombie: true},
	{pid: 300, ppid: 201, pgrp: 300},
	{pid: 301, ppid: 300, pgrp: 300},
	{pid: 302, ppid: 202, pgrp: 200},
	{pid: 400, ppid: 1, pgrp: 400},
}

// TestWalks: the walks over the process table both systems share, on a
// table made up here.
func TestWalks(t *testing.T) {
	if got := pids(descendants(fakeTable, 100)); !slices.Equal(got, []int{200, 201, 300, 301}) {
		t.Errorf("descendants of bhw-run = %v", got)
	}
	if got := pids(descendants(fakeTable, 200)); !slices.Equal(got, []int{201, 300, 301}) {
		t.Errorf("descendants of the agent = %v", got)
	}
	// Below the group's members and out of the group; 302 is a member
	// itself (its parent is a zombie, so nothing is below it in the walk).
	if got := pids(strays(fakeTable, 200)); !slices.Equal(got, []int{300, 301}) {
		t.Errorf("strays of group 200 = %v", got)
	}
	if got := descendants(fakeTable, 400); len(got) != 0 {
		t.Errorf("descendants of a leaf = %v", got)
	}
	// A table read while processes came and went may hold a loop; each
	// process is listed once and the walk ends.
	loop := []procStat{{pid: 10, ppid: 11, pgrp: 10}, {pid: 11, ppid: 10, pgrp: 10}}
	if got := pids(descendants(loop, 10)); !slices.Equal(got, []int{11}) {
		t.Errorf("descendants in a loop = %v", got)
	}
}

// procargs builds what kern.procargs2 returns: argc, the exec path, NUL
// padding, the arguments, then the environment.
func procargs(exe string, args, env []string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(args)))
	b = append(b, exe...)
	b = append(b, 0, 0, 0, 0)
	for _, s := range append(args, env...) {
		b = append(append(b, s...), 0)
	}
	return b
}

func TestParseProcargs(t *testing.T) {
	exe, args, err := parseProcargs(procargs("/opt/homebrew/bin/node", []string{"node", "/opt/homebrew/bin/gemini", "--acp"}, []string{"BLOBHUB_API_KEY=secret"}))
	if err != nil || exe != "/opt/homebrew/bin/node" || !slices.Equal(args, []string{"node", "/opt/homebrew/bin/gemini", "--acp"}) {
		t.Fatalf("parseProcargs = %q, %q, %v", exe, args, err)
	}
	for name, b := range map[string][]byte{
		"empty":              nil,
		"no end to the path": append(binary.LittleEndian.AppendUint32(nil, 1), "/bin/sh"...),
		"argc past the end":  append(binary.LittleEndian.AppendUint32(nil, 3), "/bin/sh\x00sh\x00"...),
	} {
		if _, _, err := parseProcargs(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestRuns: a leader runs the agent's executable itself (by the path it
// was given, or with its links resolved), or its interpreter with the
// script as the first argument.
func TestRuns(t *testing.T) {
	const executable, real = "/usr/bin/gemini", "/usr/lib/gemini/bundle.js"
	for _, c := range []struct {
		exe  string
		args []string
		want bool
	}{
		{real, nil, true},
		{executable, nil, true},
		{"/usr/bin/node", []string{"node", executable}, true},
		{"/usr/bin/node", []string{"node", real}, true},
		{"/usr/bin/node", []string{"node", "/usr/bin/other"}, false},
		{"/usr/bin/node", []string{"node"}, false},
		{"/usr/bin/vim", []string{"vim", "x"}, false},
		// The supervisor leading the group: bhw-run's binary, the agent's
		// path as its argv[0].
		{"/usr/local/bin/bhw-run", []string{executable, "--acp"}, true},
		{"/usr/local/bin/bhw-run", []string{"bhw-run", "doctor"}, false},
		// A holding shell under the supervisor (Antigravity's turn): the
		// agent is the script's $0.
		{"/usr/local/bin/bhw-run", []string{"/bin/sh", "-c", "read x; exec \"$0\" \"$@\"", executable, "-p"}, true},
		{"/usr/local/bin/bhw-run", []string{"/bin/sh", "-c", "exec \"$0\"", "/usr/bin/other"}, false},
		{"/usr/local/bin/bhw-run", []string{"/bin/sh", "-x", "script", executable}, false},
	} {
		if got := runs(c.exe, c.args, executable, real); got != c.want {
			t.Errorf("runs(%q, %q) = %v, want %v", c.exe, c.args, got, c.want)
		}
	}
}
