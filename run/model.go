package run

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/blobhub/bhw-run/exit"
)

// A model on this machine (the try-out's scripted stand-in, a local proxy)
// that is not up is a person's to start, and its URL is known: an agent
// pointed at it would only retry, for minutes, and end with "connection
// refused" naming neither. So before an agent starts, every loopback URL
// its environment points a *_BASE_URL variable at is dialled once; a
// refusal ends the run at once, MODEL_UNREACHABLE, with the URL and the
// fix, before the run changes anything: the messages, and a parked
// thread's answer, wait for the next run. A remote URL is not probed: the
// network is the agent's to retry, and a probe would cost every run.

// modelProbe bounds one dial of a loopback model URL.
const modelProbe = 2 * time.Second

// localModel is a loopback model URL of an agent's environment.
type localModel struct {
	Var  string // the variable that names it: ANTHROPIC_BASE_URL
	URL  string
	addr string // host:port to dial
}

// localModels are env's *_BASE_URL variables that name an http(s) URL on
// a loopback host, in name order.
func localModels(env []string) []localModel {
	var out []localModel
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if !strings.HasSuffix(k, "BASE_URL") || v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !loopbackHost(u.Hostname()) {
			continue
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		out = append(out, localModel{Var: k, URL: v, addr: net.JoinHostPort(u.Hostname(), port)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Var < out[j].Var })
	return out
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// unreachableModel is the first local model of env that does not accept a
// connection, with the dial's error; nil when all do (or there is none).
func unreachableModel(ctx context.Context, env []string) (*localModel, error) {
	for _, m := range localModels(env) {
		if err := m.dial(ctx); err != nil {
			return &m, err
		}
	}
	return nil, nil
}

// dial connects to m once, within modelProbe, and hangs up.
func (m *localModel) dial(ctx context.Context) error {
	d := net.Dialer{Timeout: modelProbe}
	c, err := d.DialContext(ctx, "tcp", m.addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// modelReachable is the run's check, before a run that will start the
// agent changes anything (its state, a prompt's answer, a slot): nil, or
// MODEL_UNREACHABLE, which leaves the thread as it is for the next run.
func (r *Runner) modelReachable(ctx context.Context, l *launch) error {
	if m, err := unreachableModel(ctx, l.Agent.Env); m != nil {
		return modelUnreachableError(l.Type, m, err)
	}
	return nil
}

// modelFix is what a person does about a local model that is down.
func modelFix(m *localModel) string {
	return fmt.Sprintf("start the model server there (for the try-out's stand-in: `make model` in the bhw-run checkout, then paste the line it prints), or point %s at one that runs", m.Var)
}

// modelUnreachableError is the run's error for m: the URL, the variable,
// what the dial said and the fix.
func modelUnreachableError(agentType string, m *localModel, err error) *exit.Error {
	return exit.Errorf(exit.CodeModelUnreachable, "%s's model at %s (%s) cannot be reached: %s; %s; the thread waits for the next run as it is",
		agentType, m.URL, m.Var, dialSaid(err), modelFix(m))
}

// dialSaid is what a failed dial says, without its preamble: "connection
// refused".
func dialSaid(err error) string {
	said := err.Error()
	if i := strings.LastIndex(said, ": "); i >= 0 {
		said = said[i+2:]
	}
	return said
}
