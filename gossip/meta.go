package gossip

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/idn-net/idn/messages"
)

// metaVersion is the NodeMeta layout version written by this build.
const metaVersion = 1

// Meta is the small per-node metadata gossiped to every node (memberlist node
// meta, encoded as messages.NodeMeta; at most MaxMetaSize bytes).
type Meta struct {
	Vertex          string
	Tier            int
	RemoteAddr      string // actor-system remote host:port
	RaftAddr        string // Raft transport host:port
	APIAddr         string // HTTP API host:port
	GPUs            int
	GPUMemMB        int
	BootstrapExpect int // voters the vertex group expects before bootstrapping
}

func toInt32(field string, v int) (int32, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("%s %d out of int32 range", field, v)
	}
	return int32(v), nil
}

// Encode returns the wire form of m (messages.NodeMeta). It does not check the
// size limit; see Config.Validate and UpdateMeta.
func (m Meta) Encode() ([]byte, error) {
	tier, err := toInt32("Tier", m.Tier)
	if err != nil {
		return nil, err
	}
	gpus, err := toInt32("GPUs", m.GPUs)
	if err != nil {
		return nil, err
	}
	mem, err := toInt32("GPUMemMB", m.GPUMemMB)
	if err != nil {
		return nil, err
	}
	be, err := toInt32("BootstrapExpect", m.BootstrapExpect)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(&messages.NodeMeta{
		Version:         metaVersion,
		Vertex:          m.Vertex,
		Tier:            tier,
		RemoteAddr:      m.RemoteAddr,
		RaftAddr:        m.RaftAddr,
		ApiAddr:         m.APIAddr,
		Gpus:            gpus,
		GpuMemMb:        mem,
		BootstrapExpect: be,
	})
}

// DecodeMeta parses metadata received from a peer. Malformed input returns an
// error, never panics.
func DecodeMeta(b []byte) (Meta, error) {
	if len(b) == 0 {
		return Meta{}, nil
	}
	var pm messages.NodeMeta
	if err := proto.Unmarshal(b, &pm); err != nil {
		return Meta{}, fmt.Errorf("gossip: bad node meta: %w", err)
	}
	return Meta{
		Vertex:          pm.GetVertex(),
		Tier:            int(pm.GetTier()),
		RemoteAddr:      pm.GetRemoteAddr(),
		RaftAddr:        pm.GetRaftAddr(),
		APIAddr:         pm.GetApiAddr(),
		GPUs:            int(pm.GetGpus()),
		GPUMemMB:        int(pm.GetGpuMemMb()),
		BootstrapExpect: int(pm.GetBootstrapExpect()),
	}, nil
}
