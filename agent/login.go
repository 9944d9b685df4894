package agent

import (
	"os"
	"strings"
)

// EnvValue is the value of key in env, the "K=V" lines of Launch.Env (""
// when absent); a later line wins, as it does for a process.
func EnvValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// KeyIn is the first of names that env sets to a non-empty value: the key
// a LoginCheck found. "" when none is set.
func KeyIn(env []string, names ...string) string {
	for _, n := range names {
		if EnvValue(env, n) != "" {
			return n
		}
	}
	return ""
}

// LoginFile reports whether path is a non-empty regular file: a login an
// agent wrote there (its token or key file). It only stats the path.
func LoginFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Size() > 0
}

// HomeCommand is the command line a person runs for an agent whose home
// (its config folder) is home: command itself, or prefixed by variable=home
// when bhw-run gives the agent a home of its own.
func HomeCommand(variable, home, command string) string {
	if home == "" {
		return command
	}
	return variable + "=" + home + " " + command
}
