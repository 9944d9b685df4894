// Package agenttest is what adapters and run are tested with: a thread.log
// in memory, a recording Handler, a scripted agent that speaks a
// protocol-neutral JSON-RPC over stdio (its Adapter runs as a third agent
// type under run), and the conformance suite every adapter passes against
// its own fake. It is imported by tests only.
package agenttest
