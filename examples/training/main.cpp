// loom-train: data-parallel training of an MLP classifier with loom as the only communication
// library. Every rank holds the whole model and trains on its shard of each global batch;
// gradients are averaged with bucketed allreduces that start while backward is still running.
//
//   loomrun -n 4 build/bin/loom-train --steps 200 --batch-size 512
//   srun -n 4 loom-train ...        mpirun -np 4 -x LOOM_ROOT=host:port loom-train ...
//
// Per step, rank 0 prints the loss, samples/s and the fraction of the step spent waiting on
// communication. The same global batch gives the same loss curve at any rank count (bit for
// bit when loom reduces in a deterministic rank order and batch sizes are powers of two).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <loom/loom.hpp>
#include <stdexcept>
#include <vector>

#include "buckets.hpp"
#include "checkpoint.hpp"
#include "data.hpp"
#include "mlp.hpp"
#include "optimizer.hpp"
#include "options.hpp"

namespace train {
namespace {

using Clock = std::chrono::steady_clock;

loom::Communicator join_job() {
  for (const char* name : {"LOOM_RANK", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"})
    if (std::getenv(name) != nullptr) return loom::Communicator::from_env();
  return loom::Communicator(loom::UniqueId::create("127.0.0.1:0"), 0, 1);  // no launcher
}

struct Shape {
  int ranks = 1, micro = 0, local = 0, grains = 0, local_grains = 0;
};

Shape shape_of(const Options& o, int ranks) {
  Shape s;
  s.ranks = ranks;
  auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
  if (o.batch_size % o.update_freq != 0)
    bad("--batch-size " + std::to_string(o.batch_size) + " is not a multiple of --update-freq " +
        std::to_string(o.update_freq));
  s.micro = o.batch_size / o.update_freq;
  s.grains = o.grains > 0 ? o.grains : (4 % ranks == 0 ? 4 : ranks);
  if (s.grains % ranks != 0)
    bad("--grains " + std::to_string(s.grains) + " is not a multiple of the rank count " +
        std::to_string(ranks));
  if (s.micro % s.grains != 0)
    bad("the micro-batch (batch-size / update-freq = " + std::to_string(s.micro) +
        ") is not a multiple of " + std::to_string(s.grains) + " grains (one or more per rank)");
  s.local = s.micro / ranks;
  s.local_grains = s.grains / ranks;
  return s;
}

std::uint64_t config_hash(const Options& o, const Mlp& m) {
  std::uint64_t h = mix64(m.num_params());
  for (int w : o.layers) h = mix64(h ^ static_cast<std::uint64_t>(w));
  h = mix64(h ^ static_cast<std::uint64_t>(o.batch_size));
  h = mix64(h ^ o.seed ^ (o.dataset_size << 20));
  h = mix64(h ^ (o.optimizer == "adam" ? 1u : 2u));
  return h;
}

struct Trainer {
  const Options& o;
  loom::Communicator& comm;
  Shape shape;
  Dataset data;
  Mlp model;
  Optimizer opt;
  GradBuckets buckets;
  std::vector<float> x;
  std::vector<int> y;

  Trainer(const Options& opts, loom::Communicator& c)
      : o(opts),
        comm(c),
        shape(shape_of(opts, c.size())),
        data(opts.seed, opts.dataset_size, opts.layers.front(), opts.layers.back()),
        model(opts.layers, opts.seed),
        opt(opts.optimizer, opts.lr, opts.momentum, model.num_params()),
        buckets(c, model, opts.bucket_cap_mb) {
    x.resize(static_cast<std::size_t>(shape.local) * static_cast<std::size_t>(data.features()));
    y.resize(static_cast<std::size_t>(shape.local));
    // Start from rank 0's weights, as a real data-parallel job does.
    comm.broadcast(std::span<float>(model.params()), 0).wait();
  }

  struct StepResult {
    double loss = 0, seconds = 0, comm_wait = 0;
  };

  StepResult step(std::uint64_t s) {
    const auto t0 = Clock::now();
    auto& g = model.grads();
    std::fill(g.begin(), g.end(), 0.0f);
    double loss = 0;
    const auto B = static_cast<std::uint64_t>(o.batch_size);
    for (int u = 0; u < o.update_freq; ++u) {
      const std::uint64_t first = s * B + static_cast<std::uint64_t>(u * shape.micro) +
                                  static_cast<std::uint64_t>(comm.rank() * shape.local);
      data.fill(first, shape.local, x.data(), y.data());
      const bool last = u + 1 == o.update_freq;
      // Local mean over this rank's B/N samples of the step, then avg over ranks.
      if (last)
        buckets.arm(static_cast<float>(shape.ranks) / static_cast<float>(o.batch_size), o.overlap);
      loss +=
          model.forward_backward(x.data(), y.data(), shape.local, shape.local_grains, [&](int l) {
            if (last) buckets.layer_done(l);
          });
    }
    std::chrono::duration<double> waited = buckets.finish();
    const auto tw = Clock::now();
    comm.allreduce(std::span<double>(&loss, 1), loom::RedOp::Sum).wait();
    waited += Clock::now() - tw;
    opt.step(model.params(), g);
    StepResult r;
    r.loss = loss / static_cast<double>(o.batch_size);
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.comm_wait = waited.count();
    return r;
  }
};

std::uint64_t resume(const Options& o, Trainer& t) {
  auto c = load_checkpoint(o.checkpoint);
  if (!c) return 0;
  if (c->config_hash != config_hash(o, t.model) || c->params.size() != t.model.num_params())
    throw std::runtime_error("checkpoint " + o.checkpoint +
                             " was written by a different model or data configuration");
  t.model.params() = c->params;
  t.opt.state() = c->opt;
  if (t.opt.state().m.size() != c->params.size())
    throw std::runtime_error("checkpoint optimizer state does not match");
  return c->step;
}

void check_replicas(loom::Communicator& comm, std::uint64_t h) {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const std::uint64_t>(&h, 1), std::span<std::uint64_t>(all)).wait();
  for (std::size_t r = 0; r < all.size(); ++r)
    if (all[r] != h)
      throw std::runtime_error("rank " + std::to_string(r) + "'s weights differ from rank 0's");
}

int run(const Options& o) {
  loom::Communicator comm = join_job();
  Trainer t(o, comm);
  const bool root = comm.rank() == 0;
  std::uint64_t start = o.resume ? resume(o, t) : 0;
  if (root) {
    std::printf("loom-train: %d ranks, layers", comm.size());
    for (int w : o.layers) std::printf(" %d", w);
    std::printf(
        ", %zu params, batch %d (%d per rank per micro-batch, update-freq %d, %d grains), "
        "%s lr %g, %zu buckets (cap %.3g MiB, overlap %s)\n",
        t.model.num_params(), o.batch_size, t.shape.local, o.update_freq, t.shape.grains,
        o.optimizer.c_str(), o.lr, t.buckets.count(), o.bucket_cap_mb, o.overlap ? "on" : "off");
    if (start > 0)
      std::printf("resumed from %s at step %llu\n", o.checkpoint.c_str(),
                  static_cast<unsigned long long>(start));
    std::fflush(stdout);
  }
  double loss = 0, total_s = 0, total_wait = 0;
  for (std::uint64_t s = start; s < static_cast<std::uint64_t>(o.steps); ++s) {
    const auto r = t.step(s);
    loss = r.loss;
    total_s += r.seconds;
    total_wait += r.comm_wait;
    const std::uint64_t done = s + 1;
    if (root && (done % static_cast<std::uint64_t>(o.log_every) == 0 ||
                 done == static_cast<std::uint64_t>(o.steps))) {
      std::printf("step %llu loss %.9g samples/s %.1f comm-wait %.3f\n",
                  static_cast<unsigned long long>(done), r.loss, o.batch_size / r.seconds,
                  r.comm_wait / r.seconds);
      std::fflush(stdout);
    }
    if (root && o.checkpoint_every > 0 &&
        done % static_cast<std::uint64_t>(o.checkpoint_every) == 0)
      save_checkpoint(o.checkpoint,
                      Checkpoint{done, config_hash(o, t.model), t.model.params(), t.opt.state()});
    if (static_cast<int>(done) == o.kill_at_step && comm.rank() == comm.size() - 1) {
      std::fprintf(stderr, "rank %d: killing myself after step %llu (--kill-at-step)\n",
                   comm.rank(), static_cast<unsigned long long>(done));
      std::raise(SIGKILL);
    }
  }
  check_replicas(comm, t.model.hash());
  if (root) {
    const double steps = static_cast<double>(static_cast<std::uint64_t>(o.steps) - start);
    std::printf("final step %d loss %.9g weights-hash %016llx mean samples/s %.1f comm-wait %.3f\n",
                o.steps, loss, static_cast<unsigned long long>(t.model.hash()),
                total_s > 0 ? steps * o.batch_size / total_s : 0.0,
                total_s > 0 ? total_wait / total_s : 0.0);
  }
  return 0;
}

}  // namespace
}  // namespace train

int main(int argc, char** argv) {
  const train::Options o = train::parse_options(argc, argv);
  try {
    return train::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom-train: %s\n", e.what());
    return 1;
  }
}
