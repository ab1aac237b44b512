// Package actors groups the behaviour of a node, one package per role:
//
//	router/     entry routing (request type rho = (task, path)) and inter-vertex forwarding with acks and retries
//	scheduler/  the vertex's group scheduler, run on the Raft leader: serve here or forward, per-model FIFO batching
//	executor/   fronts one gpu.Executor
//	allocator/  INFIDA per vertex (paper 000 Sec. IV-B control messages, mirror ascent, DepRound), commits y^v/x^v/slot via Raft
//	view/       the cluster view (members, leaders) the actors share, updated by messages
//	timing/     a delayed-send queue (edge RTT emulation, actor ticks) owned by the node
//
// Each actor is a thin shell over pure logic that is tested without an actor system.
package actors
