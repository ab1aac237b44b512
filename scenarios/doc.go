// Package scenarios runs chaos scenarios against real idn node processes.
//
// A scenario (YAML, see Scenario and the README) names a topology, how many
// nodes to start at each vertex, an open-loop workload, faults at given
// times (kill -9 a node or a vertex's Raft leader, stop one gracefully,
// freeze one with SIGSTOP or partition it off for a while, restart a node
// with its data dir) and assertions on the report. Run starts the nodes on
// 127.0.0.1 with port 0 (each with its own data dir under a temporary
// directory), joins them through the first node's gossip address, waits
// for membership and a leader per vertex via GET /v1/status, drives the
// load over HTTP, applies the faults, measures failovers, reads /metrics,
// stops every node (SIGTERM, then SIGKILL) and returns a Report.
//
// The request accounting is exact: every request the load generator issues
// ends in exactly one Outcome, and accepted = results + errors + lost where
// lost counts accepted requests that got no reply at all.
//
// quickstart.yaml, embedded as QuickstartYAML, is the default scenario of
// `idn scenario run`.
package scenarios
