// Package rl implements the workload-adaptive request scheduler of paper 002
// (Tan et al., "Reinforcement learning based online request scheduling
// framework for workload-adaptive edge deep learning inference", IEEE TMC
// 2024): the observation of the model instances, the actor and critic MLPs,
// the Gaussian-softmax action of eq. (8) with the closed-form density of
// Proposition 2 (eq. (9)), PPO with the clipped objective of eq. (10) and GAE
// of eq. (11), Adam, checkpoints, and the baselines of Sec. 5.1.7 (LW, HW,
// HW-E, SQ, InFaaS-like, SA).
//
// The package is pure and deterministic: no goroutines, no I/O beyond the
// io.Reader/io.Writer given to the checkpoint functions, no wall clock;
// randomness comes from injected sources. The parallel training runner lives
// in cmd/idn (experiment_rl.go) and only calls the pure pieces here
// (Rollout, GAE, Gradient, Adam.Step) from goroutines that each own their
// data.
package rl

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/floats"
)

// MLP is a fully connected network with tanh hidden layers and a linear
// output layer (paper 002 Sec. 5.1.4: two hidden layers of 90 and 60 units).
//
// Parameter layout in P, layer by layer: the weights W_l stored input-major
// (W_l[k*out+j] is the weight from input k to output j), then the biases b_l.
// Storing weights by input lets the first layer skip the zero entries of the
// sparse observation (one-hot queue lengths, zero-padded ages) in both the
// forward and the backward pass.
type MLP struct {
	// Sizes are the layer widths, input first, output last.
	Sizes []int
	// P holds all the parameters (see the layout above).
	P []float64
	// offsets of each layer's W and b in P.
	wOff, bOff []int
}

// ErrShape is wrapped by the errors about mismatched sizes.
var ErrShape = errors.New("shape mismatch")

// NewMLP allocates a network with the given layer sizes and zero parameters.
func NewMLP(sizes []int) (*MLP, error) {
	if len(sizes) < 2 {
		return nil, fmt.Errorf("%w: MLP sizes %v need at least an input and an output", ErrShape, sizes)
	}
	for i, s := range sizes {
		if s < 1 {
			return nil, fmt.Errorf("%w: MLP sizes[%d] = %d must be >= 1", ErrShape, i, s)
		}
	}
	m := &MLP{Sizes: append([]int(nil), sizes...)}
	off := 0
	for l := 0; l+1 < len(sizes); l++ {
		m.wOff = append(m.wOff, off)
		off += sizes[l] * sizes[l+1]
		m.bOff = append(m.bOff, off)
		off += sizes[l+1]
	}
	m.P = make([]float64, off)
	return m, nil
}

// NumParams is len(P).
func (m *MLP) NumParams() int { return len(m.P) }

// In is the input width.
func (m *MLP) In() int { return m.Sizes[0] }

// Out is the output width.
func (m *MLP) Out() int { return m.Sizes[len(m.Sizes)-1] }

// Init draws weights from N(0, gain^2/fan_in) for the hidden layers and
// N(0, outGain^2/fan_in) for the output layer; biases are zero. A small
// outGain (0.01 for the actor) starts the policy near the uniform routing.
func (m *MLP) Init(r *rand.Rand, outGain float64) {
	L := len(m.Sizes) - 1
	for l := 0; l < L; l++ {
		in, out := m.Sizes[l], m.Sizes[l+1]
		g := 1.0
		if l == L-1 {
			g = outGain
		}
		sd := g / math.Sqrt(float64(in))
		w := m.P[m.wOff[l] : m.wOff[l]+in*out]
		for i := range w {
			w[i] = r.NormFloat64() * sd
		}
		clear(m.P[m.bOff[l] : m.bOff[l]+out])
	}
}

// Clone returns a deep copy.
func (m *MLP) Clone() *MLP {
	c, _ := NewMLP(m.Sizes)
	copy(c.P, m.P)
	return c
}

// Work is the per-sample scratch space of an MLP: the activations of every
// layer (kept for the backward pass) and the back-propagated deltas. One Work
// per goroutine.
type Work struct {
	h     [][]float64 // h[0] = input (not copied), h[l] = output of layer l
	delta [][]float64
}

// NewWork allocates scratch space for m.
func (m *MLP) NewWork() *Work {
	w := &Work{h: make([][]float64, len(m.Sizes)), delta: make([][]float64, len(m.Sizes))}
	for l := 1; l < len(m.Sizes); l++ {
		w.h[l] = make([]float64, m.Sizes[l])
		w.delta[l] = make([]float64, m.Sizes[l])
	}
	return w
}

// Forward evaluates the network on x and returns the output slice (owned by
// w, valid until the next call).
func (m *MLP) Forward(x []float64, w *Work) []float64 {
	w.h[0] = x
	L := len(m.Sizes) - 1
	for l := 0; l < L; l++ {
		in, out := m.Sizes[l], m.Sizes[l+1]
		h := w.h[l+1]
		copy(h, m.P[m.bOff[l]:m.bOff[l]+out])
		W := m.P[m.wOff[l] : m.wOff[l]+in*out]
		src := w.h[l]
		for k, xk := range src {
			if xk == 0 {
				continue
			}
			floats.AddScaled(h, xk, W[k*out:(k+1)*out])
		}
		if l < L-1 {
			for j := range h {
				h[j] = math.Tanh(h[j])
			}
		}
	}
	return w.h[L]
}

// Backward accumulates into grad (laid out like P) the gradient of
// sum_j dOut[j]*out_j with respect to the parameters, for the input of the
// last Forward call on w.
func (m *MLP) Backward(dOut []float64, w *Work, grad []float64) {
	L := len(m.Sizes) - 1
	copy(w.delta[L], dOut)
	for l := L - 1; l >= 0; l-- {
		in, out := m.Sizes[l], m.Sizes[l+1]
		d := w.delta[l+1]
		floats.Add(grad[m.bOff[l]:m.bOff[l]+out], d)
		gW := grad[m.wOff[l] : m.wOff[l]+in*out]
		src := w.h[l]
		for k, xk := range src {
			if xk == 0 {
				continue
			}
			floats.AddScaled(gW[k*out:(k+1)*out], xk, d)
		}
		if l == 0 {
			break
		}
		W := m.P[m.wOff[l] : m.wOff[l]+in*out]
		dp := w.delta[l]
		for k := 0; k < in; k++ {
			hk := src[k]
			dp[k] = floats.Dot(W[k*out:(k+1)*out], d) * (1 - hk*hk)
		}
	}
}
