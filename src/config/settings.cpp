// The registry of every setting loom reads, declared once each: here, or for a transport in its
// own folder (transports/NAME/NAME_settings.inc, included below through the build).
#include <array>

#include "config/config.hpp"

namespace loom::config {
namespace {

// Ranges shared by several settings. Numbers outside a setting's range are refused at once,
// never wrapped or clamped silently.
constexpr Range kRank{0, kMaxRanks - 1};
constexpr Range kRanks{1, kMaxRanks};
constexpr Range kPort{1, 65535};
// LOOM_SPIN_US, LOOM_YIELD_US: -1 (chosen at init) or up to a second of busy waiting.
constexpr Range kWaitMicros{-1, 1'000'000};
constexpr Range kNoRange{};  // String and Bool settings
constexpr std::int64_t kKiB = 1024;
constexpr std::int64_t kMiB = 1024 * kKiB;
constexpr std::int64_t kGiB = 1024 * kMiB;

constexpr std::array kSettings = {
    // Launch: how a process finds its job.
    Spec{"LOOM_RANK", Type::Int, "", "This process's rank (set by loomrun or your launcher).",
         "launch", kRank},
    Spec{"LOOM_WORLD_SIZE", Type::Int, "", "Number of ranks in the job.", "launch", kRanks},
    Spec{"LOOM_LOCAL_RANK", Type::Int, "", "Rank among the ranks on this host.", "launch", kRank},
    Spec{"LOOM_LOCAL_SIZE", Type::Int, "", "Number of ranks on this host.", "launch", kRanks},
    Spec{"LOOM_ROOT", Type::String, "",
         "host:port of the rendezvous server that rank 0 starts; the others connect to it.",
         "launch"},
    Spec{"LOOM_ID", Type::String, "",
         "A UniqueId in hex (UniqueId::to_string); alternative to LOOM_ROOT.", "launch"},
    Spec{"LOOM_SECRET", Type::String, "",
         "Job secret shared by all ranks: 32 to 64 hex digits (128-256 bits); loomrun sets a "
         "random one. Unset: the secret file LOOM_SECRET_FILE authenticates the job.",
         "launch"},
    Spec{"LOOM_SECRET_FILE", Type::String, "",
         "Where jobs without LOOM_SECRET find the secret every rank shares: a file of 32 hex "
         "digits, mode 0600, created on first use (default ~/.config/loom/secret; a shared home "
         "directory carries it to every host). 'none' runs the job unauthenticated (with a "
         "warning).",
         "launch"},
    Spec{"RANK", Type::Int, "", "torchrun: this process's rank.", "launch", kRank},
    Spec{"WORLD_SIZE", Type::Int, "", "torchrun: number of ranks.", "launch", kRanks},
    Spec{"LOCAL_RANK", Type::Int, "", "torchrun: rank on this host.", "launch", kRank},
    Spec{"LOCAL_WORLD_SIZE", Type::Int, "", "torchrun: number of ranks on this host.", "launch",
         kRanks},
    Spec{"MASTER_ADDR", Type::String, "", "torchrun: host of the rendezvous (rank 0).", "launch"},
    Spec{"MASTER_PORT", Type::Int, "", "torchrun: port of the rendezvous.", "launch", kPort},
    Spec{"LOOM_PORT", Type::Int, "",
         "Rendezvous port for Slurm launches (default: derived from SLURM_JOB_ID and "
         "SLURM_STEP_ID, in 20000-29999).",
         "launch", kPort},
    Spec{"SLURM_PROCID", Type::Int, "", "Slurm srun: this task's rank.", "launch", kRank},
    Spec{"SLURM_NTASKS", Type::Int, "", "Slurm srun: number of tasks.", "launch", kRanks},
    Spec{"SLURM_LOCALID", Type::Int, "", "Slurm srun: task rank on this node.", "launch", kRank},
    Spec{"SLURM_STEP_NODELIST", Type::String, "",
         "Slurm srun: hostlist of the step; its first host runs rank 0 and the rendezvous.",
         "launch"},
    Spec{"SLURM_JOB_NODELIST", Type::String, "",
         "Slurm: hostlist of the allocation (used when SLURM_STEP_NODELIST is unset).", "launch"},
    Spec{"SLURM_JOB_ID", Type::String, "", "Slurm: job id (with the step id, picks the port).",
         "launch"},
    Spec{"SLURM_STEP_ID", Type::String, "", "Slurm srun: step id within the job.", "launch"},
    Spec{"OMPI_COMM_WORLD_RANK", Type::Int, "", "Open MPI mpirun: this process's rank.", "launch",
         kRank},
    Spec{"OMPI_COMM_WORLD_SIZE", Type::Int, "", "Open MPI mpirun: number of processes.", "launch",
         kRanks},
    Spec{"OMPI_COMM_WORLD_LOCAL_RANK", Type::Int, "", "Open MPI mpirun: rank on this host.",
         "launch", kRank},
    Spec{"TORCHELASTIC_RUN_ID", Type::String, "",
         "torchrun: the run's id (keeps two jobs' secrets apart).", "launch"},
    Spec{"PMIX_NAMESPACE", Type::String, "",
         "mpirun (PMIx): the job's namespace (keeps two jobs' secrets apart).", "launch"},
    Spec{"OMPI_MCA_ess_base_jobid", Type::String, "",
         "Open MPI mpirun: the job's id (keeps two jobs' secrets apart).", "launch"},

    // Logging.
    Spec{"LOOM_DEBUG", Type::String, "WARN", "Log level: OFF, ERROR, WARN, INFO, DEBUG or TRACE.",
         "log", kNoRange, Choices{"OFF|NONE|ERROR|WARN|INFO|DEBUG|TRACE", true}},
    Spec{"LOOM_DEBUG_SUBSYS", Type::String, "ALL",
         "Comma-separated subsystems to log (INIT,BOOTSTRAP,COLL,NET,EXEC,CONFIG,SHM,TOPO,CUDA) or "
         "ALL; ^NAME excludes one.",
         "log", kNoRange,
         Choices{"ALL|INIT|BOOTSTRAP|COLL|NET|EXEC|CONFIG|SHM|TOPO|CUDA", true, true}},
    Spec{"LOOM_DEBUG_FILE", Type::String, "",
         "Write logs to this file instead of stderr; %h is the host name, %p the pid.", "log"},

    // Reliability.
    Spec{"LOOM_TIMEOUT", Type::Duration, "600s",
         "Deadline for every blocking wait inside loom (setup, collectives, shutdown).",
         "reliability", Range{1, kMaxTimeout.count()}},
    Spec{"LOOM_HELLO_TIMEOUT", Type::Duration, "5s",
         "A connection to the rendezvous store or to a rank's tcp data listener that has not "
         "proved the job's secret (its hello) within this time is dropped and logged (100ms-600s). "
         "Handshakes run concurrently, so idle foreign connections never delay a rank's.",
         "reliability", Range{100, 600'000}},
    Spec{"LOOM_STORE_QUOTA", Type::Size, "64M",
         "Bytes of keys and values one rank may hold in the rendezvous store; a rank past it "
         "gets an error.",
         "reliability", Range{64 * kKiB, 64 * kGiB}},
    Spec{"LOOM_MISMATCH_CHECK_AFTER", Type::Duration, "1s",
         "An operation that has waited this long makes the ranks compare their calls of that "
         "sequence number through the store, so mismatched calls that exchange no message "
         "(reduces with different roots) fail with Mismatch instead of waiting for "
         "LOOM_TIMEOUT. 0 turns the check off; at most 1h.",
         "reliability", Range{0, 3'600'000}},

// Every transport's own settings (transports/NAME/NAME_settings.inc), collected by the build
// (cmake/LoomLayers.cmake).
#include "loom_transport_settings.inc"

    // Network (bootstrap and the transports' choice).
    Spec{"LOOM_SOCKET_IFNAME", Type::String, "",
         "Network interface(s) whose address ranks listen on and advertise (default: the "
         "interface of the route to the rendezvous root). A comma list (eth0,eth1) makes each "
         "interface a rail: the tcp transport listens on every one and spreads each peer's "
         "sockets over them (sockets paired rail by rail), so striped messages use every NIC.",
         "net"},

    Spec{"LOOM_TRANSPORTS", Type::String, "",
         "Ordered allow list of transports (shm, ofi, tcp); ^name excludes one. Default: shm "
         "for peers on the same host, ofi for the others when EFA is present, else tcp. "
         "cuda_ipc (device buffers of ranks on one host) is on unless ^cuda_ipc, or a list "
         "that does not name it.",
         "net"},

    // Topology.
    Spec{"LOOM_HOST_ID", Type::String, "",
         "Overrides this rank's host identity (default: hostname + boot id), so tests can "
         "pretend ranks live on different hosts.",
         "topo"},
    Spec{"LOOM_TOPO_FILE", Type::String, "",
         "Load the job's topology from this JSON file instead of probing with hwloc.", "topo"},
    Spec{"LOOM_TOPO_DUMP_FILE", Type::String, "",
         "Rank 0 writes the whole job's topology to this JSON file at init.", "topo"},
    Spec{"LOOM_PCI_TOPO_FILE", Type::String, "",
         "A JSON file that corrects what hwloc sees of this host's PCI devices, for virtual "
         "machines whose PCI tree does not show the PCIe switches (such as AWS p4d and p5 "
         "instances): {\"version\": 1, \"devices\": [{\"bus_id\": \"0000:4f:00.0\", "
         "\"pci_switch\": \"0000:45:00.0\", \"numa_node\": 0}, ...]}; each entry's fields "
         "replace the discovered ones (kind, os_names, pci_switch, numa_node), a bus id hwloc "
         "did not find is added (kind required). LOOM_OFI_DOMAINS=near reads the result.",
         "topo"},

    // Collectives and the executor.
    Spec{"LOOM_CHUNK_SIZE", Type::String, "auto",
         "Pipeline chunk size: a collective is split into messages of at most this many bytes. "
         "auto: 128K (chunks stay in the CPU caches), or 512K when any two ranks talk over ofi "
         "(libfabric's rendezvous costs a round trip per large message).",
         "coll"},
    Spec{"LOOM_PIPELINE_DEPTH", Type::Int, "4",
         "Chunks each rank keeps in flight per peer (scratch slots per receive stream).", "coll",
         Range{1, 64}},
    Spec{"LOOM_ALGO", Type::String, "auto",
         "Algorithm: auto (the cost model picks), ring or tree; also per collective, e.g. "
         "\"allreduce:tree,broadcast:ring\" (unlisted collectives: auto).",
         "coll"},
    Spec{"LOOM_DETERMINISTIC", Type::Bool, "0",
         "Reduce every element in rank order 0..n-1 whatever the algorithm, chunking or "
         "topology, so results are bitwise reproducible (allreduce, reduce, reduce_scatter).",
         "coll"},
    Spec{"LOOM_TUNING", Type::String, "",
         "Cost-model constants as key=value,... (the line `loom-perf --calibrate` prints); "
         "overrides the LOOM_TUNE_* settings.",
         "coll"},
    Spec{"LOOM_TUNE_INTRA_ALPHA_US", Type::String, "0.8",
         "Cost model: latency per message between ranks on one host (microseconds).", "coll"},
    Spec{"LOOM_TUNE_INTRA_GBPS", Type::String, "1.6",
         "Cost model: bandwidth between ranks on one host (GB/s).", "coll"},
    Spec{"LOOM_TUNE_INTER_ALPHA_US", Type::String, "40",
         "Cost model: latency per message between hosts (microseconds).", "coll"},
    Spec{"LOOM_TUNE_INTER_GBPS", Type::String, "1",
         "Cost model: bandwidth of one stream between hosts (GB/s).", "coll"},
    Spec{"LOOM_TUNE_NIC_GBPS", Type::String, "0",
         "Cost model: a host's total network bandwidth shared by its ranks (GB/s; 0: one "
         "stream's).",
         "coll"},
    Spec{"LOOM_TUNE_NIC_BURST_BYTES", Type::String, "0",
         "Cost model: the NICs' token bucket (tc tbf burst, bytes; 0: as read from tc).", "coll"},
    Spec{"LOOM_TUNE_REDUCE_GBPS", Type::String, "9.9",
         "Cost model: host reduction throughput (GB/s of input).", "coll"},
    Spec{"LOOM_TUNE_OVERSUB_ALPHA_US", Type::String, "1.9",
         "Cost model: extra latency per message when a host runs more ranks than CPUs (ranks "
         "block instead of spinning), for each rank beyond one on the busiest CPU "
         "(ceil(ranks/CPUs) - 1 of them).",
         "coll"},
    Spec{"LOOM_TUNE_OVERSUB_GBPS", Type::String, "7.45",
         "Cost model: total copy bandwidth of a host running more ranks than CPUs, shared by "
         "its ranks, for buffers from LOOM_TUNE_OVERSUB_DRAM_BYTES up (GB/s; 0: "
         "LOOM_TUNE_INTRA_GBPS x CPUs).",
         "coll"},
    Spec{"LOOM_TUNE_OVERSUB_CACHE_GBPS", Type::String, "12.2",
         "Cost model: the same for buffers up to LOOM_TUNE_CACHE_BYTES; in between it falls "
         "log-linearly to LOOM_TUNE_OVERSUB_GBPS (0: LOOM_TUNE_OVERSUB_GBPS at every size).",
         "coll"},
    Spec{"LOOM_TUNE_OVERSUB_DRAM_BYTES", Type::String, "16777216",
         "Cost model: buffer size from which LOOM_TUNE_OVERSUB_GBPS applies (0: "
         "LOOM_TUNE_DRAM_BYTES).",
         "coll"},
    Spec{"LOOM_TUNE_OVERSUB_TURN_US", Type::String, "0.5",
         "Cost model: extra time per round of recursive doubling for each rank beyond one per "
         "CPU on a host running more ranks than CPUs (every rank communicates in every round, "
         "so each CPU runs its ranks in turn).",
         "coll"},
    Spec{"LOOM_TUNE_INTRA_CACHE_GBPS", Type::String, "9.1",
         "Cost model: bandwidth on one host while buffers fit in LOOM_TUNE_CACHE_BYTES (GB/s; "
         "0: LOOM_TUNE_INTRA_GBPS).",
         "coll"},
    Spec{"LOOM_TUNE_INTRA_EAGER_GBPS", Type::String, "9.1",
         "Cost model: bandwidth on one host of messages below LOOM_SHM_SINGLE_COPY_MIN, which "
         "are copied through the channel's slots (GB/s; 0: LOOM_TUNE_INTRA_CACHE_GBPS).",
         "coll"},
    Spec{"LOOM_TUNE_CACHE_BYTES", Type::String, "524288",
         "Cost model: buffer size up to which LOOM_TUNE_INTRA_CACHE_GBPS applies.", "coll"},
    Spec{"LOOM_TUNE_CORE_CACHE_BYTES", Type::String, "2097152",
         "Cost model: a CPU's private cache (L2) in bytes; ranks that oversubscribe the CPUs "
         "keep the cache rate while all their buffers fit in it (0: LOOM_TUNE_CACHE_BYTES / "
         "CPUs).",
         "coll"},
    Spec{"LOOM_TUNE_DRAM_BYTES", Type::String, "33554432",
         "Cost model: buffer size from which LOOM_TUNE_INTRA_GBPS applies; between it and "
         "LOOM_TUNE_CACHE_BYTES the bandwidth falls log-linearly (0: a step at the cache size).",
         "coll"},
    Spec{"LOOM_TUNE_FUSED_REDUCE", Type::String, "1",
         "Cost model: 1 when reductions between ranks on one host run inside the receive "
         "(shared memory's fused receive-reduce), so the intra-host bandwidth already includes "
         "them; 0 adds a separate reduction pass at LOOM_TUNE_REDUCE_GBPS.",
         "coll"},
    Spec{"LOOM_TUNE_RD_MAX_BYTES", Type::String, "262144",
         "Cost model: largest allreduce buffer (bytes) for which recursive doubling is a "
         "candidate (it sends and reduces the whole buffer log2(ranks) times; 0: never).",
         "coll"},
    Spec{"LOOM_TUNE_RD_ROUND_CURVE", Type::String, "8:1.2/2048:2/32768:5.8/131072:12/262144:27",
         "Cost model: a recursive-doubling round between ranks of one host that each have a "
         "CPU, bytes:microseconds/... by buffer size (what `loom-perf --calibrate` prints), "
         "linear between the points; empty: twice the link's latency, its bandwidth and "
         "LOOM_TUNE_REDUCE_GBPS.",
         "coll"},
    Spec{"LOOM_TUNE_INTRA_EAGER_CURVE", Type::String, "1024:3.4/32768:8.5",
         "Cost model: the rate of messages through the shared-memory slots by message size, "
         "bytes:gbps/... (what `loom-perf --calibrate` prints), log-linear between the points; "
         "empty: LOOM_TUNE_INTRA_EAGER_GBPS at every size.",
         "coll"},
    Spec{"LOOM_TUNE_INTRA_CURVE", Type::String, "",
         "Cost model: the measured bandwidth between two ranks on one host by buffer size, "
         "bytes:gbps/bytes:gbps/... (what `loom-perf --calibrate` prints), interpolated "
         "log-linearly; empty: the cache plateau and memory rate of the LOOM_TUNE_* above.",
         "coll"},
    Spec{"LOOM_TUNE_OVERSUB_CURVE", Type::String, "",
         "Cost model: the total rate of a host running more ranks than CPUs by the bytes of all "
         "its ranks' buffers, in the same format; empty: LOOM_TUNE_OVERSUB_CACHE_GBPS falling "
         "to LOOM_TUNE_OVERSUB_GBPS.",
         "coll"},
    Spec{"LOOM_YIELD_US", Type::Int, "-1",
         "Microseconds a waiting rank yields the CPU (sched_yield) after its spin budget, before "
         "it blocks in the kernel until a peer wakes it. -1: 20. Where ranks share CPUs, 200 "
         "ran faster (the peers a rank waits for run meanwhile, and waking a blocked rank costs "
         "a kernel round trip and a reschedule: 8 ranks on 2 CPUs, 32 KiB allreduce 0.71x the "
         "time), but the cost model is fitted to 20 and picks worse algorithms with 200.",
         "coll", kWaitMicros},
    Spec{"LOOM_SPIN_US", Type::Int, "-1",
         "Microseconds the executor polls without progress before it yields the CPU (then, "
         "after LOOM_YIELD_US of yielding, blocks in the kernel, at most 1 ms at a time); an "
         "upper bound: the budget adapts to how long waits last. -1 chooses: 20 when this host's "
         "ranks fit its CPUs, 0 when they oversubscribe them.",
         "coll", kWaitMicros},

    // Device buffers (docs/gpu.md).
    Spec{"LOOM_DEVICE", Type::String, "auto",
         "Device runtime for device buffers and streams: auto (cuda when loom was built with "
         "CUDA and a GPU is visible, else none), cuda, none; host-sim is a test knob (loom's own "
         "tests and tools only): a host-memory simulation of the device seam (the logic, not "
         "the hardware) in the testing library loom_testing, not in libloom, so a program "
         "linking only libloom refuses it.",
         "device", kNoRange, Choices{"auto|cuda|host-sim|none"}},
    Spec{"LOOM_STREAM_GATE", Type::String, "host-function",
         "How a stream-ordered call holds its stream until the collective is done: "
         "host-function (a host function on the stream waits for it, cudaLaunchHostFunc) or "
         "wait-value (the stream waits for a word in pinned host memory that loom writes, "
         "cuStreamWaitValue32: no CUDA thread is held).",
         "device", kNoRange, Choices{"host-function|wait-value"}},
    Spec{"LOOM_NVML_LIBRARY", Type::String, "libnvidia-ml.so.1",
         "NVML library (installed with the GPU driver) read at device setup to tell NVLink "
         "from PCIe between GPUs, for the logs and loom-info; a path where the driver's "
         "library is not on the loader's path.",
         "device"},

    // Reliability: the flight recorder (docs/reliability.md).
    Spec{"LOOM_FLIGHT_RECORDER", Type::Int, "256",
         "Collective calls each communicator remembers (what they were, when they were submitted, "
         "started and completed): Communicator::flight_record(), the files of LOOM_FLIGHT_DIR "
         "and the mismatch and stall reports read them (16-65536, 168 bytes each). 0 keeps the "
         "last 256 without their times (two clock readings and a lock fewer per call).",
         "reliability", Range{0, 1 << 16}},
    Spec{"LOOM_FLIGHT_DIR", Type::String, "",
         "Directory where every rank writes its flight record "
         "(loom-flight-<communicator>-r<rank>.json) when a call fails, on SIGUSR1 with "
         "LOOM_STATUS_SIGNAL=1, and when the communicator is destroyed; loom-trace merges them. "
         "Empty: no files.",
         "reliability"},

    // Reliability: on-demand status (docs/reliability.md).
    Spec{"LOOM_STATUS_SIGNAL", Type::Bool, "0",
         "1: SIGUSR1 prints every communicator's status (Communicator::status(): progress, "
         "failure, failed ranks, last timeout report) to stderr. Off by default: SIGUSR1 "
         "belongs to the application (and its default action ends the process); not "
         "installed when the application already handles or ignores it.",
         "reliability"},
};

}  // namespace

std::span<const Spec> all_settings() {
  return kSettings;
}

}  // namespace loom::config
