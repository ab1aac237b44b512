package infida

import (
	"sort"

	"github.com/idn-net/idn/policy/idn"
)

// KStar returns K*_rho(y) of paper 000 eq. 18 as a 0-based rank into
// in.Types[rho].Cands: the smallest k with sum_{k'<=k} z^{k'} >= r_rho,
// where z^k = y_m^v l^{t,v}_{rho,m} (eq. 11), and gamma^{K*} its cost.
// The cheapest repository candidate (last of Cands) has z = r_rho, so K*
// always exists.
func KStar(in *idn.Instance, rho int, r float64, l []float64, y []float64) (int, float64) {
	t := in.Types[rho]
	sum := 0.0
	for k, c := range t.Cands {
		a := 1.0
		if !c.Repo {
			a = y[in.Index(c.V, c.M)]
		}
		sum += a * l[k]
		if sum >= r {
			return k, c.Cost
		}
	}
	k := len(t.Cands) - 1
	return k, t.Cands[k].Cost
}

// Subgradient writes into g (indexed by in.Index(v, m), zeroed first) the
// supergradient of the concave gain G(r, l, y) (eq. 16) at y given by
// paper 000 eq. 18, centralised form:
//
//	g^v_m = sum_rho l^{t,v}_{rho,m} (gamma_rho^{K*_rho(y)} - C^v_{p,m}) 1{kappa_rho(v,m) < K*_rho(y)}.
//
// Entries of repository models are computed too (they are never updated).
// kstar, when non-nil, receives K* (0-based) per type.
func Subgradient(in *idn.Instance, r []float64, l idn.Loads, y []float64, g []float64, kstar []int) {
	for i := range g {
		g[i] = 0
	}
	for rho := range in.Types {
		ks, gk := KStar(in, rho, r[rho], l[rho], y)
		if kstar != nil {
			kstar[rho] = ks
		}
		for k := 0; k < ks; k++ {
			c := in.Types[rho].Cands[k]
			g[in.Index(c.V, c.M)] += l[rho][k] * (gk - c.Cost)
		}
	}
}

// Entry is one (z, gamma) pair of the control messages of paper 000 Sec.
// IV-B: the fractional effective capacity z^k = y_m^v l^{t,v}_{rho,m} of one
// candidate and its cost gamma^k, with the candidate's path position and
// model index to break cost ties exactly as the centralised cost order.
type Entry struct {
	// Z is the fractional effective capacity z^k (eq. 11).
	Z float64
	// Gamma is the serving cost gamma^k (eq. 6).
	Gamma float64
	// Pos is the path position of the hosting vertex, M the model index.
	Pos, M int
}

func entryLess(a, b Entry) bool {
	if a.Gamma != b.Gamma {
		return a.Gamma < b.Gamma
	}
	if a.Pos != b.Pos {
		return a.Pos < b.Pos
	}
	return a.M < b.M
}

// UpMsg is the upstream control message of paper 000 Sec. IV-B, step 1-2,
// for one request type: the multiplicity r_rho, the cumulative counter Z,
// and the out-of-order (z, gamma) entries of downstream vertices whose cost
// exceeds what some upstream vertex may offer. Once Z >= R the message is
// Done and GammaK holds gamma^{K*} (step 3).
type UpMsg struct {
	// Type is the request type index.
	Type int
	// R is r_rho^t; Z is the cumulative effective capacity counter.
	R, Z float64
	// Pending holds the entries not yet added to Z, in increasing order.
	Pending []Entry
	// Done reports that K* was found.
	Done bool
	// GammaK is gamma^{K*}, valid once Done.
	GammaK float64
}

// LocalEntries returns the entries of the vertex at path position j of type
// rho under fractional state y and capacities l (its own candidates, in
// increasing cost order): what that vertex contributes to the upstream
// message. Repository models have z = l (y fixed to 1).
func LocalEntries(in *idn.Instance, rho, j int, l []float64, y []float64) []Entry {
	var out []Entry
	for k, c := range in.Types[rho].Cands {
		if c.Pos != j {
			continue
		}
		a := 1.0
		if !c.Repo {
			a = y[in.Index(c.V, c.M)]
		}
		out = append(out, Entry{Z: a * l[k], Gamma: c.Cost, Pos: c.Pos, M: c.M})
	}
	return out
}

// UpstreamStep processes an upstream message at one vertex (paper 000 Sec.
// IV-B, step 2): it merges the vertex's local entries with the pending
// ones and adds to Z, in increasing cost order, every entry whose cost is
// at most upMin, the smallest cost any vertex further upstream can offer
// for this type (known from the cost announcements of Sec. III-E; +Inf at
// the repository). Entries of larger cost stay pending and travel on. It
// stops as soon as Z >= R, setting Done and GammaK = gamma^{K*}. It is a
// no-op on a Done message.
func UpstreamStep(msg *UpMsg, local []Entry, upMin float64) {
	if msg.Done {
		return
	}
	msg.Pending = append(msg.Pending, local...)
	sort.SliceStable(msg.Pending, func(a, b int) bool { return entryLess(msg.Pending[a], msg.Pending[b]) })
	applied := 0
	for _, e := range msg.Pending {
		if e.Gamma > upMin {
			break
		}
		applied++
		msg.Z += e.Z
		if msg.Z >= msg.R {
			msg.Done = true
			msg.GammaK = e.Gamma
			break
		}
	}
	msg.Pending = append(msg.Pending[:0], msg.Pending[applied:]...)
	if msg.Done {
		msg.Pending = msg.Pending[:0]
	}
}

// DownstreamStep is step 3-4 of paper 000 Sec. IV-B at one vertex: given
// gamma^{K*} from the downstream message, it adds to gv (the vertex's
// subgradient, indexed by model) h_m = l^{t,v}_{rho,m} (gamma^{K*} - C^v_{p,m})
// of eq. 19 for each of its candidates of type rho with kappa < K*. Since
// candidates ranked before K* have cost <= gamma^{K*} and equal-cost ones
// contribute 0, the indicator reduces to C < gamma^{K*}.
func DownstreamStep(in *idn.Instance, rho, j int, l []float64, gammaK float64, gv []float64) {
	for k, c := range in.Types[rho].Cands {
		if c.Pos != j || c.Cost >= gammaK {
			continue
		}
		gv[c.M] += l[k] * (gammaK - c.Cost)
	}
}

// DistributedSubgradient runs the control-message protocol of Sec. IV-B
// sequentially (upstream along each path until Z >= r, then downstream)
// and writes the resulting subgradient into g. It is the reference the
// actor implementation must match; it equals Subgradient on the same
// inputs.
func DistributedSubgradient(in *idn.Instance, r []float64, l idn.Loads, y []float64, g []float64) {
	for i := range g {
		g[i] = 0
	}
	for rho, t := range in.Types {
		msg := UpMsg{Type: rho, R: r[rho]}
		last := len(t.Path) - 1
		for j := range t.Path {
			UpstreamStep(&msg, LocalEntries(in, rho, j, l[rho], y), in.UpstreamMinCost(rho, j))
			if msg.Done {
				last = j
				break
			}
		}
		for j := last; j >= 0; j-- {
			v := t.Path[j]
			DownstreamStep(in, rho, j, l[rho], msg.GammaK, g[in.Index(v, 0):in.Index(v, 0)+in.NM])
		}
	}
}
