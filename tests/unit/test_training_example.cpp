// The pieces of examples/training (loom-train): backward matches finite differences, the
// gradient does not depend on how grains are split, buckets cover the gradient exactly once,
// checkpoints round-trip and reject damage.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <loom/loom.hpp>
#include <thread>

#include "examples/training/buckets.hpp"
#include "examples/training/checkpoint.hpp"
#include "examples/training/data.hpp"
#include "examples/training/mlp.hpp"

using Catch::Matchers::Contains;

namespace {
const std::vector<int> kLayers{5, 7, 6, 3};

double loss_at(train::Mlp& m, const std::vector<float>& x, const std::vector<int>& y, int n) {
  std::fill(m.grads().begin(), m.grads().end(), 0.0f);
  return m.forward_backward(x.data(), y.data(), n, 1, [](int) {});
}
}  // namespace

TEST_CASE("loom-train: backward matches finite differences", "[training]") {
  train::Dataset data(3, 1000, kLayers.front(), kLayers.back());
  const int n = 8;
  std::vector<float> x(static_cast<std::size_t>(n * kLayers.front()));
  std::vector<int> y(n);
  data.fill(17, n, x.data(), y.data());
  train::Mlp m(kLayers, 5);
  loss_at(m, x, y, n);
  const std::vector<float> grad = m.grads();
  int checked = 0;
  for (std::size_t i = 0; i < m.num_params(); i += 3) {
    const float keep = m.params()[i];
    const float h = 1e-2f;
    m.params()[i] = keep + h;
    const double up = loss_at(m, x, y, n);
    m.params()[i] = keep - h;
    const double down = loss_at(m, x, y, n);
    m.params()[i] = keep;
    const double numeric = (up - down) / (2.0 * h);
    INFO("parameter " << i << ": analytic " << grad[i] << " numeric " << numeric);
    CHECK(std::abs(numeric - grad[i]) <= 2e-2 * std::max(1.0, std::abs(numeric)));
    ++checked;
  }
  CHECK(checked > 20);
}

TEST_CASE("loom-train: grain sums are the same however the batch is split", "[training]") {
  train::Dataset data(1, 4096, kLayers.front(), kLayers.back());
  const int n = 16;
  std::vector<float> x(static_cast<std::size_t>(n * kLayers.front()));
  std::vector<int> y(n);
  data.fill(0, n, x.data(), y.data());
  // One process with 4 grains == the in-order sum of 4 separate quarter-batch gradients.
  train::Mlp whole(kLayers, 9);
  const double loss = whole.forward_backward(x.data(), y.data(), n, 4, [](int) {});
  train::Mlp parts(kLayers, 9);
  std::vector<float> sum(parts.num_params(), 0.0f);
  double loss_sum = 0;
  for (std::ptrdiff_t q = 0; q < 4; ++q) {
    std::fill(parts.grads().begin(), parts.grads().end(), 0.0f);
    loss_sum += parts.forward_backward(x.data() + q * 4 * kLayers.front(), y.data() + q * 4, 4, 1,
                                       [](int) {});
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += parts.grads()[i];
  }
  CHECK(loss == loss_sum);
  CHECK(whole.grads() == sum);  // bit for bit
  CHECK_THROWS_AS(whole.forward_backward(x.data(), y.data(), n, 3, [](int) {}),
                  std::invalid_argument);
}

TEST_CASE("loom-train: buckets cover every gradient once and average them", "[training]") {
  const loom::UniqueId id = loom::UniqueId::create("127.0.0.1");
  const int nranks = 2;
  std::vector<std::size_t> counts(nranks);
  std::vector<std::vector<float>> results(nranks);
  std::vector<std::thread> ranks;
  ranks.reserve(nranks);
  for (int r = 0; r < nranks; ++r)
    ranks.emplace_back([&, r] {
      loom::Communicator comm(id, r, nranks);
      train::Mlp m(kLayers, 1);
      train::GradBuckets b(comm, m, 0.0001);  // 104-byte cap: one layer per bucket
      counts[static_cast<std::size_t>(r)] = b.count();
      for (std::size_t i = 0; i < m.num_params(); ++i)
        m.grads()[i] = static_cast<float>(r + 1) * static_cast<float>(i % 7);
      b.arm(2.0f, true);
      for (int l = 2; l >= 0; --l) b.layer_done(l);
      (void)b.finish();
      results[static_cast<std::size_t>(r)] = m.grads();
    });
  for (auto& t : ranks) t.join();
  CHECK(counts[0] == 3);
  for (const auto& g : results) {
    REQUIRE(g.size() == 5 * 7 + 7 + 7 * 6 + 6 + 6 * 3 + 3);
    for (std::size_t i = 0; i < g.size(); ++i)
      REQUIRE(g[i] == 2.0f * 1.5f * static_cast<float>(i % 7));  // avg of 2x(1, 2) x i%7
  }
}

TEST_CASE("loom-train: checkpoints round-trip and reject damage", "[training]") {
  const std::string path = "loom_train_ckpt_test.bin";
  train::Checkpoint c;
  c.step = 42;
  c.config_hash = 0xabcdef;
  c.params = {1.5f, -2.25f, 3.0f};
  c.opt.m = {0.5f, 0.25f, 0.125f};
  c.opt.v = {1, 2, 3};
  c.opt.t = 42;
  train::save_checkpoint(path, c);
  auto back = train::load_checkpoint(path);
  REQUIRE(back.has_value());
  CHECK(back->step == 42);
  CHECK(back->config_hash == 0xabcdef);
  CHECK(back->params == c.params);
  CHECK(back->opt.m == c.opt.m);
  CHECK(back->opt.v == c.opt.v);
  CHECK(back->opt.t == 42);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  CHECK_THROWS_WITH(train::load_checkpoint(path), Contains("corrupt"));
  std::remove(path.c_str());
  CHECK_FALSE(train::load_checkpoint(path).has_value());
}
