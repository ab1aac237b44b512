package allocator_test

import (
	"fmt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/idn-net/idn/actors/allocator"
	"github.com/idn-net/idn/messages"
	"github.com/idn-net/idn/node/nodetest"
	"github.com/idn-net/idn/policy/idn"
	"github.com/idn-net/idn/policy/idn/idntest"
	"github.com/idn-net/idn/policy/infida"
	"github.com/idn-net/idn/policy/sim"
)

const eta = 3e-3

// cluster is one allocator actor per vertex spread over nsys actor systems,
// each with its own protoactor remote on 127.0.0.1, so control messages
// between vertices on different systems cross gRPC.
type cluster struct {
	systems []*actor.ActorSystem
	pids    map[int]*actor.PID
	metrics map[int]*allocator.Metrics
	results chan allocator.Result
}

// transport is nsys actor systems, each with its own protoactor remote on
// 127.0.0.1, started once per test (Remote.Start writes grpc's global
// logger, so starts are ordered before any traffic).
type transport struct {
	systems []*actor.ActorSystem
	remotes []*remote.Remote
}

func startTransport(t *testing.T, nsys int) *transport {
	t.Helper()
	tr := &transport{}
	for i := 0; i < nsys; i++ {
		quiet := slog.New(slog.DiscardHandler)
		sys := actor.NewActorSystem(actor.WithDeadLetterRequestLogging(false),
			actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
		creds := &pingCreds{TransportCredentials: insecure.NewCredentials()}
		seen := make(chan struct{})
		creds.armed.Store(&seen)
		r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0, remote.WithServerOptions(grpc.Creds(creds))))
		r.Start()
		// Wait until the server has served a (probe) connection, so its
		// start-up logging is done before the next Start replaces grpc's
		// global logger (see node.startRemote).
		conn, err := net.DialTimeout("tcp", sys.Address(), 5*time.Second)
		if err != nil {
			t.Fatalf("remote %d: %v", i, err)
		}
		select {
		case <-seen:
		case <-time.After(5 * time.Second):
			t.Fatalf("remote %d: probe not served", i)
		}
		conn.Close()
		tr.systems = append(tr.systems, sys)
		tr.remotes = append(tr.remotes, r)
	}
	t.Cleanup(func() {
		for i, sys := range tr.systems {
			// as node.shutdown: Shutdown(true) races with the endpoint
			// writers; stop the server, then the endpoint actors.
			tr.remotes[i].Shutdown(false)
			for _, id := range []string{"EndpointSupervisor", "activator"} {
				_ = sys.Root.StopFuture(sys.NewLocalPID(id)).Wait()
			}
			sys.Shutdown()
		}
	})
	return tr
}

var clusterSeq atomic.Int64

func startCluster(t *testing.T, tr *transport, in *idn.Instance, y0 map[int][]float64, timeout time.Duration) *cluster {
	t.Helper()
	nsys := len(tr.systems)
	c := &cluster{systems: tr.systems, pids: map[int]*actor.PID{}, metrics: map[int]*allocator.Metrics{}, results: make(chan allocator.Result, 4*in.NV)}
	seq := clusterSeq.Add(1)
	t.Cleanup(func() {
		for v, pid := range c.pids {
			_ = c.systems[v%nsys].Root.StopFuture(pid).Wait()
		}
	})
	for v := 0; v < in.NV; v++ {
		m := &allocator.Metrics{}
		a, err := allocator.New(allocator.Config{Instance: in, Vertex: v, Eta: eta, Y: y0[v], Timeout: timeout, Metrics: m,
			SampleEvery: 1, Rand: sim.NewRand(uint64(100 + v)), Residual: infida.ResidualBudget,
			OnSlot: func(r allocator.Result) { c.results <- r }})
		if err != nil {
			t.Fatal(err)
		}
		sys := c.systems[v%nsys]
		pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return a }), fmt.Sprintf("allocator-%d-%d", seq, v))
		if err != nil {
			t.Fatal(err)
		}
		c.pids[v] = pid
		c.metrics[v] = m
	}
	for v, pid := range c.pids {
		peers := map[int]*actor.PID{}
		for u, p := range c.pids {
			// each allocator addresses its peers by their remote address
			peers[u] = actor.NewPID(p.Address, p.Id)
		}
		c.systems[v%nsys].Root.Send(pid, &allocator.Peers{ByVertex: peers})
	}
	return c
}

func (c *cluster) slot(t *testing.T, in *idn.Instance, s int64, r []float64, l idn.Loads) map[int]allocator.Result {
	t.Helper()
	for v, pid := range c.pids {
		c.systems[v%len(c.systems)].Root.Send(pid, &allocator.StartSlot{Slot: s, R: r, L: l})
	}
	got := map[int]allocator.Result{}
	deadline := time.After(30 * time.Second)
	for len(got) < in.NV {
		select {
		case res := <-c.results:
			if res.Slot != s {
				t.Fatalf("vertex %d reported slot %d during slot %d", res.Vertex, res.Slot, s)
			}
			got[res.Vertex] = res
		case <-deadline:
			t.Fatalf("slot %d: only %d of %d vertices stepped", s, len(got), in.NV)
		}
	}
	return got
}

// randomState returns random y^v per vertex in [1e-3, 1].
func randomState(rng *rand.Rand, in *idn.Instance) map[int][]float64 {
	y0 := map[int][]float64{}
	for v := 0; v < in.NV; v++ {
		st := infida.NewVertexState(in, v)
		y := make([]float64, len(st.Y))
		for i := range y {
			y[i] = 1e-3 + (1-1e-3)*rng.Float64()
		}
		y0[v] = y
	}
	return y0
}

func randomLoads(rng *rand.Rand, in *idn.Instance, scale float64) ([]float64, idn.Loads) {
	r := make([]float64, len(in.Types))
	for i := range r {
		r[i] = scale * rng.Float64()
		if rng.IntN(6) == 0 {
			r[i] = 0
		}
	}
	l := in.FullLoads(r)
	for rho, t := range in.Types {
		for k, cd := range t.Cands {
			if !cd.Repo {
				l[rho][k] *= rng.Float64()
			}
		}
	}
	return r, l
}

// equivalence runs nslots slots through the actors and, independently, the
// centralised eq. 18 (infida.Subgradient on the flat y) followed by the
// per-vertex step of policy/infida, and compares g^v and y^v.
func equivalence(t *testing.T, tr *transport, in *idn.Instance, rng *rand.Rand, nslots int, scale float64, wantCarried bool) (maxErr float64) {
	y0 := randomState(rng, in)
	ref := make([]*infida.VertexState, in.NV)
	rngs := make([]*rand.Rand, in.NV)
	for v := range ref {
		rngs[v] = sim.NewRand(uint64(100 + v))
		ref[v] = infida.NewVertexState(in, v)
		copy(ref[v].Y, y0[v])
	}
	c := startCluster(t, tr, in, y0, time.Minute)
	g := make([]float64, in.NV*in.NM)
	gmax, dymax := 0.0, 0.0
	for s := int64(0); s < int64(nslots); s++ {
		r, l := randomLoads(rng, in, scale)
		yflat := in.OmegaAlloc()
		for v, st := range ref {
			for i, m := range st.Models {
				yflat[in.Index(v, m)] = st.Y[i]
			}
		}
		infida.Subgradient(in, r, l, yflat, g, nil)
		got := c.slot(t, in, s, r, l)
		for v, st := range ref {
			res := got[v]
			if res.Missing != 0 {
				t.Fatalf("slot %d vertex %d: %d types missing", s, v, res.Missing)
			}
			for _, m := range st.Models {
				want := g[in.Index(v, m)]
				gmax = math.Max(gmax, math.Abs(want))
				d := math.Abs(res.G[m] - want)
				maxErr = math.Max(maxErr, d/math.Max(1, math.Abs(want)))
				if d > 1e-9*math.Max(1, math.Abs(want)) {
					t.Fatalf("slot %d vertex %d model %d: g from messages %v, centralised %v", s, v, m, res.G[m], want)
				}
			}
			before := append([]float64(nil), st.Y...)
			st.Step(g[in.Index(v, 0):in.Index(v, 0)+in.NM], eta)
			for i := range before {
				dymax = math.Max(dymax, math.Abs(st.Y[i]-before[i]))
			}
			// x^v = DepRound(y^v) as policy/infida.Infida samples it
			gv := g[in.Index(v, 0) : in.Index(v, 0)+in.NM]
			st.Sample(rngs[v], infida.ResidualBudget, func(i int) float64 { return gv[st.Models[i]] + st.Y[i]*1e-12 })
			if !res.Sampled || !slices.Equal(res.X, st.X) {
				t.Fatalf("slot %d vertex %d: x from messages %v, centralised %v", s, v, res.X, st.X)
			}
			for i := range st.Y {
				d := math.Abs(res.Y[i] - st.Y[i])
				maxErr = math.Max(maxErr, d)
				if d > 1e-9 {
					t.Fatalf("slot %d vertex %d: y[%d] from messages %v, centralised %v", s, v, i, res.Y[i], st.Y[i])
				}
			}
		}
	}
	var msgs, batches, raw, wire, comp, to, carried uint64
	for _, m := range c.metrics {
		carried += m.PendingCarried.Load()
		msgs += m.Messages.Load()
		batches += m.Batches.Load()
		raw += m.RawBytes.Load()
		wire += m.WireBytes.Load()
		comp += m.Compressed.Load()
		to += m.Timeouts.Load() + m.Malformed.Load() + m.Stale.Load()
	}
	if to != 0 {
		t.Fatalf("%d timeouts/malformed/stale on a loss-free run", to)
	}
	if gmax == 0 || dymax == 0 {
		t.Fatalf("trivial instance: max |g| %v, max |dy| %v", gmax, dymax)
	}
	if wantCarried && carried == 0 {
		t.Fatal("no pending out-of-order entry crossed the wire")
	}
	t.Logf("%d vertices, %d types, %d slots: max error %.3g (max |g| %.3g, max |dy| %.3g); %d pending entries carried; per slot: %.1f control messages in %.1f batches, %.0f bytes raw, %.0f on the wire (%d batches compressed in all)",
		in.NV, len(in.Types), nslots, maxErr, gmax, dymax, carried, float64(msgs)/float64(nslots), float64(batches)/float64(nslots),
		float64(raw)/float64(nslots), float64(wire)/float64(nslots), comp)
	return maxErr
}

func topologyII(t *testing.T, rng *rand.Rand) *idn.Instance {
	return topology(t, rng, idn.TopologyII())
}

// topology builds the instance of paper 000 Sec. VI on g: each task enters
// at two random base stations.
func topology(t *testing.T, rng *rand.Rand, g *idn.Graph) *idn.Instance {
	cat := idn.YOLOv4Catalog()
	bs := g.BaseStations()
	var keys []idn.TypeKey
	for _, task := range cat.Tasks {
		for _, p := range rng.Perm(len(bs))[:2] {
			keys = append(keys, idn.TypeKey{Task: task, Entry: bs[p]})
		}
	}
	in, err := idn.NewInstance(g, cat, idn.DefaultInstanceConfig(), keys)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// Paper 000 Sec. IV-B over the wire equals eq. 18 and Algorithm 1's step
// computed centrally, on Topology II with random request counts.
func TestEquivalenceTopologyII(t *testing.T) {
	if nodetest.Isolate(t) {
		return
	}
	rng := sim.NewRand(7)
	in := topologyII(t, rng)
	equivalence(t, startTransport(t, 4), in, rng, 3, 2000, false)
}

// The same on Topology I (36 vertices, 4 actor systems).
func TestEquivalenceTopologyI(t *testing.T) {
	if nodetest.Isolate(t) {
		return
	}
	rng := sim.NewRand(6)
	in := topology(t, rng, idn.TopologyI())
	equivalence(t, startTransport(t, 4), in, rng, 3, 400, false)
}

// The same on random line instances whose costs are out of path order, so
// pending (z, gamma) entries travel upstream in the messages.
func TestEquivalenceOutOfOrder(t *testing.T) {
	if nodetest.Isolate(t) {
		return
	}
	rng := sim.NewRand(8)
	tr := startTransport(t, 5)
	found := 0
	for trial := 0; trial < 200 && found < 3; trial++ {
		in, _, _ := idntest.Random(rng, 3+rng.IntN(3), 1+rng.IntN(3), 2+rng.IntN(4), 20*rng.Float64())
		ooo := false
		for _, ty := range in.Types {
			for k := 1; k < len(ty.Cands); k++ {
				if ty.Cands[k].Pos < ty.Cands[k-1].Pos && !ty.Cands[k].Repo {
					ooo = true
				}
			}
		}
		if !ooo {
			continue
		}
		found++
		equivalence(t, tr, in, rng, 3, 20, true)
	}
	if found == 0 {
		t.Fatal("no out-of-order instance found")
	}
}

// A vertex whose control messages are lost steps after the timeout with
// what it has and counts the event; a malformed envelope is dropped and
// counted, never panics.
func TestLostAndMalformedControl(t *testing.T) {
	if nodetest.Isolate(t) {
		return
	}
	rng := sim.NewRand(9)
	in := topologyII(t, rng)
	c := startCluster(t, startTransport(t, 2), in, nil, 300*time.Millisecond)
	// every vertex loses its peers: everything sent is dropped, so only
	// types completed at their entry vertex finish.
	for v, pid := range c.pids {
		c.systems[v%2].Root.Send(pid, &allocator.Peers{ByVertex: map[int]*actor.PID{}})
	}
	r, l := randomLoads(rng, in, 2000)
	got := c.slot(t, in, 0, r, l)
	missing := 0
	for _, res := range got {
		missing += res.Missing
	}
	var timeouts uint64
	for _, m := range c.metrics {
		timeouts += m.Timeouts.Load()
	}
	if missing == 0 || timeouts == 0 {
		t.Fatalf("lost messages not counted: missing %d timeouts %d", missing, timeouts)
	}
	root := c.systems[0].Root
	root.Send(c.pids[0], &messages.ControlEnvelope{Slot: 1, FromVertex: 1, Zstd: true, Batch: []byte("garbage")})
	root.Send(c.pids[0], &messages.ControlEnvelope{Slot: 1, FromVertex: 1, Batch: []byte{0xff, 0xff}})
	root.Send(c.pids[0], &messages.ControlEnvelope{Slot: 1, FromVertex: 99999})
	deadline := time.Now().Add(10 * time.Second)
	for c.metrics[0].Malformed.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := c.metrics[0].Malformed.Load(); n != 3 {
		t.Fatalf("malformed counted %d, want 3", n)
	}
	t.Logf("timeouts %d, missing types %d", timeouts, missing)
}

// pingCreds are insecure transport credentials that swallow the first
// connection after being armed (the start probe), as in package node.
type pingCreds struct {
	credentials.TransportCredentials
	armed atomic.Pointer[chan struct{}]
}

func (c *pingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if p := c.armed.Swap(nil); p != nil {
		close(*p)
		_ = conn.Close()
		return nil, nil, io.EOF
	}
	return c.TransportCredentials.ServerHandshake(conn)
}

func (c *pingCreds) Clone() credentials.TransportCredentials { return c }
