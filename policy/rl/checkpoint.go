package rl

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/idn-net/idn/policy/sim/instances"
)

// Checkpoint file format, version 1 (all integers little-endian):
//
//	offset  size  field
//	0       8     magic "IDNRLPPO"
//	8       4     uint32 format version (= 1)
//	12      4     uint32 length H of the JSON header
//	16      H     JSON header (CheckpointMeta): training configuration, the
//	              serving system the policy was trained for, the layer sizes,
//	              progress counters, and the command that produced the file
//	16+H    8*A   actor parameters, float64 IEEE-754, in MLP.P layout
//	        8*C   critic parameters, same encoding
//	end-4   4     uint32 CRC-32 (IEEE) of every preceding byte
//
// A = sum over layers of in*out + out for the actor sizes in the header, C
// likewise for the critic. Adam's moments are not stored: resuming from a
// checkpoint restarts them.
const (
	checkpointMagic   = "IDNRLPPO"
	CheckpointVersion = 1
)

// CheckpointMeta is the JSON header of a checkpoint.
type CheckpointMeta struct {
	// Format is "idn-rl-ppo".
	Format string `json:"format"`
	// Version is the format version (CheckpointVersion).
	Version int `json:"version"`
	// Config is the training configuration (includes FullObs).
	Config Config `json:"config"`
	// ActorSizes and CriticSizes are the layer widths, input first.
	ActorSizes  []int `json:"actor_sizes"`
	CriticSizes []int `json:"critic_sizes"`
	// Instances is the serving system the policy was trained on.
	Instances instances.Config `json:"instances"`
	// Workload names the training arrival process (spp, periodic).
	Workload string `json:"workload"`
	// RewardScale is the resolved reward multiplier.
	RewardScale float64 `json:"reward_scale"`
	// CriticInit records that the critic's output bias was initialised.
	CriticInit bool `json:"critic_init"`
	// Steps and Updates are the training slots and policy updates done.
	Steps   int64 `json:"steps"`
	Updates int64 `json:"updates"`
	// Seed is the training seed.
	Seed uint64 `json:"seed"`
	// Command is the command line that produced the file.
	Command string `json:"command,omitempty"`
	// WallSeconds is the training wall time when the file was written.
	WallSeconds float64 `json:"wall_seconds,omitempty"`
	// Notes is free text.
	Notes string `json:"notes,omitempty"`
}

// ErrCheckpoint is wrapped by every checkpoint decoding error.
var ErrCheckpoint = errors.New("invalid checkpoint")

// WriteCheckpoint writes the agent in format version 1. meta's Format,
// Version, Config, sizes, RewardScale, CriticInit, Steps and Updates are
// filled from the agent.
func WriteCheckpoint(w io.Writer, a *Agent, meta CheckpointMeta) error {
	meta.Format = "idn-rl-ppo"
	meta.Version = CheckpointVersion
	meta.Config = a.Cfg
	meta.ActorSizes = a.Actor.Sizes
	meta.CriticSizes = a.Critic.Sizes
	meta.RewardScale = a.RewardScale
	meta.CriticInit = a.CriticInit
	meta.Steps = a.Steps
	meta.Updates = a.Updates
	hdr, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("checkpoint header: %w", err)
	}
	crc := crc32.NewIEEE()
	bw := bufio.NewWriter(io.MultiWriter(w, crc))
	bw.WriteString(checkpointMagic)
	var b4 [4]byte
	binary.LittleEndian.PutUint32(b4[:], CheckpointVersion)
	bw.Write(b4[:])
	binary.LittleEndian.PutUint32(b4[:], uint32(len(hdr)))
	bw.Write(b4[:])
	bw.Write(hdr)
	var b8 [8]byte
	for _, p := range [][]float64{a.Actor.P, a.Critic.P} {
		for _, x := range p {
			binary.LittleEndian.PutUint64(b8[:], math.Float64bits(x))
			bw.Write(b8[:])
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("checkpoint write: %w", err)
	}
	binary.LittleEndian.PutUint32(b4[:], crc.Sum32())
	if _, err := w.Write(b4[:]); err != nil {
		return fmt.Errorf("checkpoint write: %w", err)
	}
	return nil
}

// ReadCheckpoint decodes a checkpoint written by WriteCheckpoint and returns
// the agent (with fresh Adam moments) and its header.
func ReadCheckpoint(r io.Reader) (*Agent, CheckpointMeta, error) {
	var meta CheckpointMeta
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, meta, fmt.Errorf("%w: read: %v", ErrCheckpoint, err)
	}
	if len(data) < 20 || string(data[:8]) != checkpointMagic {
		return nil, meta, fmt.Errorf("%w: magic %q, want %q", ErrCheckpoint, safePrefix(data), checkpointMagic)
	}
	body, tail := data[:len(data)-4], data[len(data)-4:]
	if got, want := crc32.ChecksumIEEE(body), binary.LittleEndian.Uint32(tail); got != want {
		return nil, meta, fmt.Errorf("%w: crc32 = %08x, file says %08x", ErrCheckpoint, got, want)
	}
	if v := binary.LittleEndian.Uint32(data[8:12]); v != CheckpointVersion {
		return nil, meta, fmt.Errorf("%w: version = %d, this build reads %d", ErrCheckpoint, v, CheckpointVersion)
	}
	h := int(binary.LittleEndian.Uint32(data[12:16]))
	if 16+h > len(body) {
		return nil, meta, fmt.Errorf("%w: header length = %d exceeds the file", ErrCheckpoint, h)
	}
	if err := json.Unmarshal(body[16:16+h], &meta); err != nil {
		return nil, meta, fmt.Errorf("%w: header: %v", ErrCheckpoint, err)
	}
	if err := meta.Config.Validate(); err != nil {
		return nil, meta, fmt.Errorf("%w: config: %w", ErrCheckpoint, err)
	}
	actor, err := NewMLP(meta.ActorSizes)
	if err != nil {
		return nil, meta, fmt.Errorf("%w: actor_sizes: %w", ErrCheckpoint, err)
	}
	critic, err := NewMLP(meta.CriticSizes)
	if err != nil {
		return nil, meta, fmt.Errorf("%w: critic_sizes: %w", ErrCheckpoint, err)
	}
	payload := body[16+h:]
	if want := 8 * (len(actor.P) + len(critic.P)); len(payload) != want {
		return nil, meta, fmt.Errorf("%w: parameter bytes = %d, want %d for the header's sizes", ErrCheckpoint, len(payload), want)
	}
	for i := range actor.P {
		actor.P[i] = math.Float64frombits(binary.LittleEndian.Uint64(payload[8*i:]))
	}
	payload = payload[8*len(actor.P):]
	for i := range critic.P {
		critic.P[i] = math.Float64frombits(binary.LittleEndian.Uint64(payload[8*i:]))
	}
	a := &Agent{Cfg: meta.Config, Actor: actor, Critic: critic, AdamA: NewAdam(len(actor.P)), AdamC: NewAdam(len(critic.P)),
		Steps: meta.Steps, Updates: meta.Updates, RewardScale: meta.RewardScale, CriticInit: meta.CriticInit}
	return a, meta, nil
}

func safePrefix(b []byte) string {
	if len(b) > 8 {
		b = b[:8]
	}
	return string(b)
}
