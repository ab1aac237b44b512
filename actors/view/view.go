// Package view is the cluster view an actor keeps from membership messages:
// the live members of every vertex and the leader of the actor's own vertex.
// It is pure data (no goroutines, no I/O); actors update it from the
// messages of this package, sent by the node from gossip and consensus
// events.
package view

import (
	"sort"
)

// Member is one node as the serving actors see it.
type Member struct {
	// Name is the node name (unique in the cluster).
	Name string
	// Vertex is the vertex the node belongs to.
	Vertex string
	// RemoteAddr is the host:port of the node's actor system.
	RemoteAddr string
	// GPUs is the number of executors the node runs (named ExecutorID(i)).
	GPUs int
	// Alive is false once the member left or was declared dead.
	Alive bool
}

// MembersSnapshot replaces the whole membership (sent periodically and at start).
type MembersSnapshot struct {
	// Members lists every known member; those absent are dropped.
	Members []Member
}

// MemberChanged upserts one member (Alive=false marks it down).
type MemberChanged struct {
	// Member is the new state of the member.
	Member Member
}

// LeaderChanged tells the actors of a vertex who its Raft leader is.
type LeaderChanged struct {
	// Vertex is the vertex of the group.
	Vertex string
	// Name and RemoteAddr identify the leader; empty when there is none.
	Name, RemoteAddr string
}

// View is the membership state of one actor. The zero value is empty and usable.
type View struct {
	byName   map[string]Member
	byVertex map[string][]Member // live members sorted by name; rebuilt lazily
	dirty    bool
	leader   LeaderChanged
}

// Apply updates the view with a snapshot, a member change or a leader change;
// other messages are ignored. It reports whether msg was one of these.
func (v *View) Apply(msg any) bool {
	switch m := msg.(type) {
	case *MembersSnapshot:
		v.byName = make(map[string]Member, len(m.Members))
		for _, mm := range m.Members {
			if mm.Name != "" {
				v.byName[mm.Name] = mm
			}
		}
		v.dirty = true
	case *MemberChanged:
		if m.Member.Name == "" {
			return true
		}
		if v.byName == nil {
			v.byName = map[string]Member{}
		}
		v.byName[m.Member.Name] = m.Member
		v.dirty = true
	case *LeaderChanged:
		v.leader = *m
	default:
		return false
	}
	return true
}

// Member returns the named member.
func (v *View) Member(name string) (Member, bool) {
	m, ok := v.byName[name]
	return m, ok
}

// Live returns the live members of a vertex sorted by name. The slice must not be modified.
func (v *View) Live(vertex string) []Member {
	if v.dirty || v.byVertex == nil {
		v.byVertex = map[string][]Member{}
		for _, m := range v.byName {
			if m.Alive && m.RemoteAddr != "" {
				v.byVertex[m.Vertex] = append(v.byVertex[m.Vertex], m)
			}
		}
		for _, ms := range v.byVertex {
			sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
		}
		v.dirty = false
	}
	return v.byVertex[vertex]
}

// IsAlive reports whether the named member is known and alive.
func (v *View) IsAlive(name string) bool {
	m, ok := v.byName[name]
	return ok && m.Alive
}

// Leader returns the last leader announced for the actor's own vertex.
func (v *View) Leader() LeaderChanged { return v.leader }

// ExecutorID is the process id of a node's i-th executor actor.
func ExecutorID(i int) string {
	return "executor-" + itoa(i)
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	neg := i < 0
	if neg {
		i = -i
	}
	var b [20]byte
	p := len(b)
	for i > 0 {
		p--
		b[p] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		p--
		b[p] = '-'
	}
	return string(b[p:])
}

// Well-known process ids of the serving actors on every node.
const (
	// RouterID is the router actor of every node.
	RouterID = "router"
	// SchedulerID is the vertex scheduler, present on the group leader only.
	SchedulerID = "scheduler"
	// InboxID receives the InferReply of requests that entered at the node.
	InboxID = "inbox"
	// AllocatorID is the INFIDA allocator actor of a vertex leader (paper 000).
	AllocatorID = "allocator"
)
