// Package idn is the model of an inference delivery network (IDN) of paper
// 000 (Si Salem, Castellano, Neglia, Pianese, Araldo, "Towards Inference
// Delivery Networks", ../shared/seeds/000_0292b3d7f140d091.txt): the graph,
// its tiers and RTT weights, routing paths, the task/model catalog, request
// types, the serving cost eq. 6, cost ranks, the serving strategy eq. 12 and
// the allocation gain eq. 13/16. It is shared by the pure policies
// (policy/infida, policy/sim/slot) and the node runtime: there is one
// topology format and one catalog format.
//
// # API summary (for the runtime)
//
// ParseTopologyYAML(bytes) returns a *Graph: Vertices []Vertex{ID, Tier,
// BudgetMB, GPU}, Edges []Edge{A, B, RTTms}, Repositories (task -> vertex
// id, plus DefaultRepository); g.VertexIndex(id), g.RTT(a, b) (ms; +Inf if
// not adjacent), g.Repository(task), g.Path(from, task) (shortest-RTT path
// of vertex ids ending at the task's repository, ties broken by fewer hops
// then lexicographic ids; errors wrap ErrUnknownVertex / ErrUnknownTask /
// ErrNoPath), g.BaseStations(). ParseCatalogYAML(bytes) returns a *Catalog:
// Tasks []string, Models []Model{Name, Task, Accuracy (0..1 scale), SizeMB,
// Speed map[gpu kind]Speed{FPS, AlphaMs, BetaMs}}; c.ModelsFor(task) (model
// indices), c.Delay(m, gpu) (ms = 1000/FPS), c.Capacity(m, gpu, slotSeconds)
// (= FPS*slotSeconds), c.Speed(m, gpu).BatchLatencyMs(n) (alpha*n+beta for
// emulated executors), c.CheckGPUs(g). Embedded defaults: DefaultTopologyYAML
// (Topology II), TopologyIYAML, DefaultCatalogYAML (YOLOv4 Table II, 20 tasks
// x 30 models), and the constructors TopologyII(), TopologyI(),
// YOLOv4Catalog(). All validation errors wrap ErrInvalid and name the field
// and value; callers branch with errors.Is. NewInstance(graph, catalog,
// InstanceConfig{Alpha, InaccuracyScale, SlotSeconds}, []TypeKey{{Task,
// Entry}}) builds the indexed problem used by the policies: per request type
// its path and its candidates (vertex, model) in increasing cost (eq. 6)
// order, i.e. the cost ranks kappa; sizes, delays, capacities L_m^v and the
// repository allocation omega per (vertex, model); Cost12 / Gain13 / Gain16
// and TypeServe (the serving strategy of Sec. III-E) over flat allocation
// vectors indexed by Index(v, m).
//
// # Topology format
//
// A topology document lists vertices (id, tier, budget_mb = allocation
// budget b^v in MB of GPU memory, gpu = GPU kind), undirected edges with
// their round-trip time in ms, and the repository vertex of each task
// (default applies to every task not listed). A repository vertex hosts
// every model of its task permanently (omega_m^v = 1, Sec. III-A) with
// unlimited capacity, so eq. 9 always holds.
//
//	name: topology-ii
//	vertices:
//	  - {id: cloud, tier: 0, budget_mb: 346860, gpu: titan-rtx}
//	  - {id: dc-0,  tier: 1, budget_mb: 16384,  gpu: titan-rtx}
//	  - {id: co-0,  tier: 3, budget_mb: 8192,   gpu: gtx-980}
//	  - {id: bs-0,  tier: 4, budget_mb: 4096,   gpu: gtx-980}
//	  - {id: bs-1,  tier: 4, budget_mb: 4096,   gpu: gtx-980}
//	edges:
//	  - {a: dc-0, b: cloud, rtt_ms: 40}
//	  - {a: co-0, b: dc-0,  rtt_ms: 21}
//	  - {a: bs-0, b: co-0,  rtt_ms: 6}
//	  - {a: bs-1, b: co-0,  rtt_ms: 6}
//	repositories:
//	  default: cloud
//	  tasks: {task-03: dc-0}   # optional per-task override
//
// Rejected with a field-named error: empty or duplicate vertex id, negative
// tier or budget, missing gpu, unknown edge endpoint, self loop, duplicate
// edge, negative RTT, unknown repository vertex, no repository at all, and
// unknown YAML keys.
//
// # Catalog format
//
// A catalog document gives the tasks (tasks: [..] or task_count with
// task_prefix, generating "task-00".."task-19") and the models, either
// explicitly (models: [{name, task, accuracy, size_mb, speed}]) or as
// variants expanded to every task and replica (named
// "<task>/<variant>#<replica>"; replicas are distinct models, footnote 2).
// accuracy is on a 0..1 scale (Table II's mAP 65.7 is 0.657); speed maps a
// GPU kind to {fps, alpha_ms, beta_ms}.
//
//	name: yolov4
//	task_count: 20
//	task_prefix: task-
//	replicas: 3
//	variants:
//	  - {name: yolov4-608p, accuracy: 0.657, size_mb: 1577, speed: {titan-rtx: {fps: 41.7}, gtx-980: {fps: 14.2}}}
//	models:
//	  - {name: resnet50, task: task-00, accuracy: 0.76, size_mb: 98, speed: {titan-rtx: {fps: 900, alpha_ms: 0.8, beta_ms: 2}}}
//
// Rejected: no tasks, duplicate task or model name, a model of an unknown
// task, a task with no model, accuracy outside [0,1], non-positive size, a
// speed with no positive throughput, unknown YAML keys.
//
// # Readings of the paper
//
// Cost eq. 6 is C = sum of RTTs (ms) + d_m^v (ms) + alpha*(100*(1-a_m)):
// inaccuracy is measured in percentage points (Fig. 6: "inaccuracy is given
// by 100 - mAP"), so alpha is ms per mAP point. With this reading the tier-0
// repository picks the second most accurate model (yolov4-512p) for alpha
// in {3,4,5}, as Sec. VI-A states; with a 0..1 scale the accuracy term would
// be negligible for every alpha the paper uses. InstanceConfig.InaccuracyScale
// (default 100) makes this explicit. Checked against the alternatives with
// Table II's Titan RTX column at the repository (67 ms of RTT is common to
// all): in ms with a 0..1 accuracy the cheapest repository model is
// tiny-288p for every alpha <= 5; in seconds with a 0..1 accuracy it is
// 608p for alpha = 3, 4, 5; only ms with mAP points gives 512p ("the
// repository node picks the second most accurate model because it provides
// the smallest combined cost in Eq. (6)", Sec. VI-A) for alpha in {3,4,5}
// (and 6, 7). Delay d_m^v = 1000/FPS ms ("as model complexity decreases,
// the number of frames a GPU can process per second increases, and
// consequently the average inference delay decreases", Sec. VI).
//
// Capacities are per hosted model: L_m^v = FPS * slot seconds for every
// model on v, independently of the other models v hosts ("it can serve at
// most L_m^v requests during one time slot", Sec. III-D). Sec. III-D adds
// "in absence of other requests for other models", which could suggest
// that co-located models share one GPU's throughput, but the paper's own
// model and experiments make replicas add capacity: footnote 2 ("each node
// [may] host multiple copies of the same model to satisfy a larger number
// of request[s] ... two distinct models with identical performance and
// requirements"), eq. 7 subtracts only the same model's load from L_m^v,
// and in Fig. 5c INFIDA "selects instead multiple replicas of the most
// accurate models. Since higher quality models feature, in general, a
// lower serving capacity" -- replicas on one vertex would be useless if
// they shared one GPU's frames per second. So a vertex's models do not
// share throughput; the only per-vertex resource is GPU memory ("We take
// GPU memory of the computing nodes as the limiting budget", Sec. VI),
// s_m^v = Table II's memory (MB) per replica, and 1 GB = 1024 MB.
//
// Repository: Sec. III-A says repository nodes "always run one model
// capable of serving all the requests for task i" and Sec. VI-A that "the
// tier-0 node acts as a repository and its allocation is fixed; ... the
// repository node picks the second most accurate model because it provides
// the smallest combined cost". Marking every model of the task as a
// repository model (omega = 1) with unlimited capacity, as this package
// does ("The node at tier 0 can store the entire models catalog", Sec. VI),
// serves exactly like hosting only that cheapest model with unlimited
// capacity: requests reaching the repository always take its cheapest
// model (RequestType.Cands stops there), so costs and gains are the same.
package idn
