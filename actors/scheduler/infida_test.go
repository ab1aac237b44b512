package scheduler

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/idn-net/idn/actors/router"
	"github.com/idn-net/idn/actors/view"
	"github.com/idn-net/idn/messages"
)

// fakeMeter is a Meter with per-model capacities per 1-second slot.
type fakeMeter struct {
	capacity map[string]float64 // absent: unlimited
	slot     int64
	used     map[string]float64
	arrivals []string // "task@entry"
	serves   []string // "task@entry:model"
}

func newFakeMeter(capacity map[string]float64) *fakeMeter {
	return &fakeMeter{capacity: capacity, used: map[string]float64{}}
}

func (f *fakeMeter) roll(now time.Time) {
	if s := now.Unix(); s != f.slot {
		f.slot, f.used = s, map[string]float64{}
	}
}

func (f *fakeMeter) Arrive(now time.Time, task, entry string) {
	f.arrivals = append(f.arrivals, task+"@"+entry)
}

func (f *fakeMeter) Serve(now time.Time, task, entry, model string) {
	f.roll(now)
	f.used[model]++
	f.serves = append(f.serves, task+"@"+entry+":"+model)
}

func (f *fakeMeter) Remaining(now time.Time, model string) float64 {
	f.roll(now)
	c, ok := f.capacity[model]
	if !ok {
		return math.Inf(1)
	}
	return c - f.used[model]
}

var allocPID = actor.NewPID("n1:1", "allocator")

// newInfidaCore is newCore in INFIDA mode: lo is cheaper than hi here.
func newInfidaCore(t *testing.T, vertex string, hosted []string, gpus int, m *fakeMeter) *Core {
	t.Helper()
	s := newCore(t, vertex, nil, gpus)
	cfg := s.cfg
	cfg.Hosted = hosted
	cfg.Infida = &Infida{Meter: m, LocalCost: map[string]float64{"lo": 15, "hi": 20}, Allocator: allocPID}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s = NewCore(cfg)
	s.Handle(t0, &view.MembersSnapshot{Members: []view.Member{{Name: "n1", Vertex: vertex, RemoteAddr: "n1:1", GPUs: gpus, Alive: true}}})
	return s
}

func TestInfidaServesCheapestLocalWhenNoCheaperUpstream(t *testing.T) {
	m := newFakeMeter(nil)
	s := newInfidaCore(t, "mid", []string{"lo", "hi"}, 1, m)
	// No upstream cost known: serve locally with the cheapest model (lo,
	// although hi is more accurate).
	rb, ok := find[*messages.RunBatch](s.Handle(t0, req("a", 0, 0, time.Second)))
	if !ok || rb.Model != "lo" {
		t.Fatalf("want lo served, got %+v", rb)
	}
	// Upstream costlier (or equal): still local.
	s.Handle(t0, &UpstreamCosts{Best: map[string]float64{"det": 15}})
	outs := s.Handle(t0, req("b", 0, 0, time.Second))
	if _, fwd := find[*router.ForwardOut](outs); fwd || s.Queued() != 1 {
		t.Fatalf("b not served locally: %+v", outs)
	}
	if want := []string{"det@mid", "det@mid"}; !reflect.DeepEqual(m.arrivals, want) {
		t.Fatalf("arrivals %v, want %v", m.arrivals, want)
	}
	if want := []string{"det@mid:lo", "det@mid:lo"}; !reflect.DeepEqual(m.serves, want) {
		t.Fatalf("serves %v, want %v", m.serves, want)
	}
}

func TestInfidaForwardsWhenUpstreamCheaper(t *testing.T) {
	m := newFakeMeter(nil)
	s := newInfidaCore(t, "mid", []string{"lo", "hi"}, 1, m)
	s.Handle(t0, &UpstreamCosts{Best: map[string]float64{"det": 14.5}})
	outs := s.Handle(t0, req("a", 0, 0, time.Second))
	fo, ok := find[*router.ForwardOut](outs)
	if !ok || fo.Req.Id != "a" || s.Stats().Forwarded != 1 {
		t.Fatalf("not forwarded: %+v", outs)
	}
	if _, ok := find[*messages.ForwardAck](outs); !ok {
		t.Fatal("no ack")
	}
	// The same request again (a retried forward) is not counted twice.
	s.Handle(t0, req("a", 0, 0, time.Second))
	if len(m.arrivals) != 1 || len(m.serves) != 0 {
		t.Fatalf("arrivals %v serves %v", m.arrivals, m.serves)
	}
	// A later UpstreamCosts without the task: nothing cheaper known.
	s.Handle(t0, &UpstreamCosts{Best: map[string]float64{"other": 1}})
	if rb, ok := find[*messages.RunBatch](s.Handle(t0, req("b", 0, 0, time.Second))); !ok || rb.Model != "lo" {
		t.Fatalf("b: want lo served, got %+v", rb)
	}
}

func TestInfidaCapacityExhaustionForwardsAndNotifies(t *testing.T) {
	m := newFakeMeter(map[string]float64{"lo": 1, "hi": 1})
	s := newInfidaCore(t, "mid", []string{"lo", "hi"}, 2, m)
	outs := s.Handle(t0, req("a", 0, 0, time.Second))
	if ex, ok := find[*Exhausted](outs); !ok || !reflect.DeepEqual(ex.Models, []string{"lo"}) {
		t.Fatalf("a: want Exhausted [lo], got %+v", outs)
	}
	for _, o := range outs {
		if _, ok := o.Msg.(*Exhausted); ok && o.To != allocPID {
			t.Fatalf("Exhausted sent to %v", o.To)
		}
	}
	outs = s.Handle(t0, req("b", 0, 0, time.Second))
	if rb, ok := find[*messages.RunBatch](outs); !ok || rb.Model != "hi" {
		t.Fatalf("b: want hi (lo exhausted), got %+v", outs)
	}
	if ex, ok := find[*Exhausted](outs); !ok || !reflect.DeepEqual(ex.Models, []string{"hi", "lo"}) {
		t.Fatalf("b: want Exhausted [hi lo], got %+v", outs)
	}
	outs = s.Handle(t0, req("c", 0, 0, time.Second))
	if _, ok := find[*router.ForwardOut](outs); !ok {
		t.Fatalf("c: want forwarded (capacity exhausted), got %+v", outs)
	}
	if _, ok := find[*Exhausted](outs); ok {
		t.Fatal("c: Exhausted resent although the set did not change")
	}
	// A new slot: the set is back to empty.
	outs = s.Handle(t0.Add(time.Second), &Tick{})
	if ex, ok := find[*Exhausted](outs); !ok || len(ex.Models) != 0 {
		t.Fatalf("new slot: want empty Exhausted, got %+v", outs)
	}
	if st := s.Stats(); st.Exhausted != 3 || st.Forwarded != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestInfidaRepositoryIgnoresCapacity(t *testing.T) {
	m := newFakeMeter(map[string]float64{"lo": 0, "hi": 0})
	s := newInfidaCore(t, "repo", []string{"lo", "hi"}, 1, m)
	s.Handle(t0, &UpstreamCosts{Best: map[string]float64{"det": 1}}) // ignored at the repository
	outs := s.Handle(t0, req("a", 0, 1, time.Second))
	if rb, ok := find[*messages.RunBatch](outs); !ok || rb.Model != "lo" {
		t.Fatalf("repository did not serve the cheapest model: %+v", outs)
	}
	// Hop 1: not an arrival; the admission is recorded.
	if len(m.arrivals) != 0 || !reflect.DeepEqual(m.serves, []string{"det@mid:lo"}) {
		t.Fatalf("arrivals %v serves %v", m.arrivals, m.serves)
	}
	// Queues full: today's fallback (overloaded).
	for _, id := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		s.Handle(t0, req(id, 0, 1, time.Minute))
	}
	rep, ok := find[*messages.InferReply](s.Handle(t0, req("z", 0, 1, time.Minute)))
	if !ok || rep.ErrorKind != messages.ErrorKind_ERROR_KIND_OVERLOADED {
		t.Fatalf("want overloaded, got %+v", rep)
	}
}

func TestInfidaArriveOnlyAtHopZero(t *testing.T) {
	m := newFakeMeter(nil)
	s := newInfidaCore(t, "mid", []string{"lo"}, 1, m)
	r := req("a", 0, 0, time.Second)
	r.Path = []string{"edge", "mid", "repo"}
	r.Hop = 1
	s.Handle(t0, r)
	if len(m.arrivals) != 0 || !reflect.DeepEqual(m.serves, []string{"det@edge:lo"}) {
		t.Fatalf("arrivals %v serves %v", m.arrivals, m.serves)
	}
	s.Handle(t0, req("b", 0, 0, time.Second))
	if !reflect.DeepEqual(m.arrivals, []string{"det@mid"}) {
		t.Fatalf("arrivals %v", m.arrivals)
	}
}

// TestRemovedModelRequestsAreRedecided covers both modes: queued requests
// of a model no longer hosted are served by another model or forwarded,
// never dropped; the in-flight batch finishes.
func TestRemovedModelRequestsAreRedecided(t *testing.T) {
	for _, mode := range []string{"static", "infida"} {
		t.Run(mode, func(t *testing.T) {
			var s *Core
			if mode == "infida" {
				s = newInfidaCore(t, "mid", []string{"lo", "hi"}, 1, newFakeMeter(nil))
			} else {
				s = newCore(t, "mid", []string{"lo", "hi"}, 1)
			}
			rb, ok := find[*messages.RunBatch](s.Handle(t0, req("a", 0, 0, time.Second)))
			if !ok {
				t.Fatal("a not dispatched")
			}
			first := rb.Model
			other := map[string]string{"lo": "hi", "hi": "lo"}[first]
			s.Handle(t0, req("b", 0, 0, time.Second)) // queued behind a
			if s.Queued() != 1 {
				t.Fatalf("queued %d", s.Queued())
			}
			outs := s.Handle(t0, &HostedChanged{Models: []string{other}})
			if _, fwd := find[*router.ForwardOut](outs); fwd || s.Queued() != 1 || s.Stats().Redecided != 1 {
				t.Fatalf("b not re-decided onto %s: outs %+v queued %d stats %+v", other, outs, s.Queued(), s.Stats())
			}
			// The in-flight batch of the removed model finishes; b runs on the other model.
			outs = s.Handle(t0, &messages.BatchDone{BatchId: rb.BatchId, Ok: true, Loaded: []string{other}})
			rb2, ok := find[*messages.RunBatch](outs)
			if !ok || rb2.Model != other || rb2.Items[0].Request.Id != "b" {
				t.Fatalf("b not dispatched on %s: %+v", other, outs)
			}
			// Nothing of the task hosted any more: queued requests are forwarded.
			s.Handle(t0, req("c", 0, 0, time.Second))
			outs = s.Handle(t0, &HostedChanged{Models: nil})
			fo, ok := find[*router.ForwardOut](outs)
			if !ok || fo.Req.Id != "c" || s.Queued() != 0 {
				t.Fatalf("c not forwarded: %+v", outs)
			}
			if _, ok := find[*messages.InferReply](outs); ok {
				t.Fatal("a request was answered with an error instead of re-decided")
			}
		})
	}
}

// TestFailedBatchOfRemovedModelIsRedecided: a batch of a removed model
// failing after the change does not strand its requests.
func TestFailedBatchOfRemovedModelIsRedecided(t *testing.T) {
	s := newCore(t, "mid", []string{"lo", "hi"}, 1)
	rb, _ := find[*messages.RunBatch](s.Handle(t0, req("a", 0, 0, time.Second)))
	s.Handle(t0, &HostedChanged{Models: []string{"lo"}}) // rb is on hi (most accurate)
	if rb.Model != "hi" {
		t.Fatalf("first batch on %s", rb.Model)
	}
	outs := s.Handle(t0, &messages.BatchDone{BatchId: rb.BatchId, Ok: false, Error: "gpu: model not loaded: hi"})
	rb2, ok := find[*messages.RunBatch](outs)
	if !ok || rb2.Model != "lo" || rb2.Items[0].Request.Id != "a" {
		t.Fatalf("a not re-decided onto lo: %+v", outs)
	}
}

func TestMissingIsNotSticky(t *testing.T) {
	s := newCore(t, "mid", []string{"lo", "hi"}, 1)
	rb, _ := find[*messages.RunBatch](s.Handle(t0, req("a", 0.8, 0, time.Minute)))
	if rb.Model != "hi" {
		t.Fatalf("first batch on %s", rb.Model)
	}
	// hi not loaded on the only executor: a waits (no executor can run hi).
	outs := s.Handle(t0, &messages.BatchDone{BatchId: rb.BatchId, Ok: false, Error: "gpu: model not loaded: hi"})
	if _, ok := find[*messages.RunBatch](outs); ok || s.Queued() != 1 {
		t.Fatalf("dispatched to an executor missing hi: %+v", outs)
	}
	// b goes to lo; its batch reports hi loaded after all: hi is runnable again.
	rbLo, ok := find[*messages.RunBatch](s.Handle(t0, req("b", 0.4, 0, time.Minute)))
	if !ok || rbLo.Model != "lo" {
		t.Fatalf("b: %+v", rbLo)
	}
	outs = s.Handle(t0, &messages.BatchDone{BatchId: rbLo.BatchId, Ok: true, Loaded: []string{"lo", "hi"}})
	rb3, ok := find[*messages.RunBatch](outs)
	if !ok || rb3.Model != "hi" || rb3.Items[0].Request.Id != "a" {
		t.Fatalf("a not dispatched once hi is loaded: %+v", outs)
	}
	// Missing again; a HostedChanged clears it too.
	outs = s.Handle(t0, &messages.BatchDone{BatchId: rb3.BatchId, Ok: false, Error: "gpu: model not loaded: hi"})
	if _, ok := find[*messages.RunBatch](outs); ok {
		t.Fatalf("dispatched to an executor missing hi: %+v", outs)
	}
	outs = s.Handle(t0, &HostedChanged{Models: []string{"lo", "hi"}})
	if rb4, ok := find[*messages.RunBatch](outs); !ok || rb4.Model != "hi" {
		t.Fatalf("a not dispatched after HostedChanged: %+v", outs)
	}
}

func TestValidateInfida(t *testing.T) {
	cases := map[string]Config{
		"infida.meter":      {Infida: &Infida{}},
		"infida.local_cost": {Infida: &Infida{Meter: newFakeMeter(nil), LocalCost: map[string]float64{"lo": math.NaN()}}},
	}
	for field, c := range cases {
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: got %v", field, err)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("static config: %v", err)
	}
}
