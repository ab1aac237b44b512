package scenarios

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"
)

// LeaderChange is one point of a vertex's leadership timeline.
type LeaderChange struct {
	// AtS is when the runner saw the change, in seconds from the start of
	// the load (polled every 250 ms).
	AtS float64 `json:"at_s"`
	// Leader is the node reporting is_leader; "" when every live node of
	// the vertex answered and none did, or none is live; several names
	// joined by "," when more than one did.
	Leader string `json:"leader"`
}

// leaderWatcher records every vertex's leader over the load, including
// changes no fault caused.
type leaderWatcher struct {
	c        *cluster
	vertices []string

	mu       sync.Mutex
	timeline map[string][]LeaderChange
}

func newLeaderWatcher(c *cluster) *leaderWatcher {
	seen := map[string]bool{}
	var vs []string
	for _, name := range c.order {
		if v := c.nodes[name].spec.Vertex; !seen[v] {
			seen[v] = true
			vs = append(vs, v)
		}
	}
	return &leaderWatcher{c: c, vertices: vs, timeline: map[string][]LeaderChange{}}
}

// run polls until stop is closed or ctx is cancelled.
func (lw *leaderWatcher) run(ctx context.Context, start time.Time, stop <-chan struct{}) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		lw.poll(ctx, start)
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

func (lw *leaderWatcher) poll(ctx context.Context, start time.Time) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	leaders := map[string][]string{}
	answered := map[string]bool{}
	failed := map[string]bool{} // a live node did not answer: "no leader" is unknown
	hasLive := map[string]bool{}
	for _, name := range lw.c.order {
		if _, ok := lw.c.live(name); !ok {
			continue
		}
		hasLive[lw.c.nodes[name].spec.Vertex] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := lw.c.status(ctx, name, time.Second)
			v := lw.c.nodes[name].spec.Vertex
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[v] = true
				return
			}
			answered[v] = true
			if st.IsLeader {
				leaders[v] = append(leaders[v], name)
			}
		}()
	}
	wg.Wait()
	at := time.Since(start).Seconds()
	lw.mu.Lock()
	defer lw.mu.Unlock()
	for _, v := range lw.vertices {
		l := leaders[v]
		sort.Strings(l)
		cur := strings.Join(l, ",")
		tl := lw.timeline[v]
		if cur == "" && hasLive[v] && (failed[v] || !answered[v]) {
			continue // maybe the leader just did not answer in time
		}
		if len(tl) == 0 || tl[len(tl)-1].Leader != cur {
			lw.timeline[v] = append(tl, LeaderChange{AtS: at, Leader: cur})
		}
	}
}

func (lw *leaderWatcher) results() map[string][]LeaderChange {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	out := make(map[string][]LeaderChange, len(lw.timeline))
	for v, tl := range lw.timeline {
		out[v] = append([]LeaderChange(nil), tl...)
	}
	return out
}
