#include "device/peer_read_plan.hpp"

#include <algorithm>

namespace loom::device {
namespace {

constexpr std::size_t kUnitBytes = 64;

// A reduction over every rank's `at` bytes into `dsts`.
MultiReduce reduction(const coll::OpDesc& op, int nranks, const RankBuffers& b, std::size_t at,
                      std::size_t count) {
  MultiReduce m;
  m.dtype = op.dtype;
  m.op = op.redop;
  m.count = count;
  m.divide_by = op.redop == RedOp::Avg ? nranks : 0;
  for (int k = 0; k < nranks; ++k)
    m.src[static_cast<std::size_t>(k)] = b.send[static_cast<std::size_t>(k)] + at;
  m.nsrc = nranks;
  return m;
}

MultiReduce copy_of(const void* src, std::size_t bytes) {
  MultiReduce m;
  m.dtype = DataType::Uint8;
  m.op = RedOp::Sum;
  m.count = bytes;
  m.src[0] = src;
  m.nsrc = 1;
  return m;
}

}  // namespace

bool peer_read_serves(const coll::OpDesc& op) {
  switch (op.kind) {
    case coll::CollKind::AllReduce:
    case coll::CollKind::ReduceScatter:
    case coll::CollKind::Reduce: return !op.premultiplies();
    case coll::CollKind::AllGather:
    case coll::CollKind::Broadcast: return true;
    default: return false;
  }
}

Block peer_read_block(std::size_t count, std::size_t elem, int k, int nranks) {
  const std::size_t unit = elem < kUnitBytes ? kUnitBytes / elem : 1;
  const std::size_t units = (count + unit - 1) / unit;
  const std::size_t n = static_cast<std::size_t>(nranks);
  const std::size_t per = (units + n - 1) / n * unit;  // elements per block
  const std::size_t begin = std::min(count, per * static_cast<std::size_t>(k));
  return {begin, std::min(count, begin + per)};
}

std::optional<MultiReduce> peer_read_launch(const coll::OpDesc& op, int rank, int nranks,
                                            const RankBuffers& b) {
  const std::size_t es = dtype_size(op.dtype);
  const auto r = static_cast<std::size_t>(rank);
  switch (op.kind) {
    case coll::CollKind::AllReduce: {
      const Block blk = peer_read_block(op.count, es, rank, nranks);
      if (blk.size() == 0) return std::nullopt;
      MultiReduce m = reduction(op, nranks, b, blk.begin * es, blk.size());
      for (int k = 0; k < nranks; ++k)
        m.dst[static_cast<std::size_t>(k)] = b.recv[static_cast<std::size_t>(k)] + blk.begin * es;
      m.ndst = nranks;
      return m;
    }
    case coll::CollKind::ReduceScatter: {
      MultiReduce m = reduction(op, nranks, b, r * op.count * es, op.count);
      m.dst[0] = b.recv[r];
      m.ndst = 1;
      return m;
    }
    case coll::CollKind::Reduce: {
      const Block blk = peer_read_block(op.count, es, rank, nranks);
      if (blk.size() == 0) return std::nullopt;
      MultiReduce m = reduction(op, nranks, b, blk.begin * es, blk.size());
      m.dst[0] = b.recv[static_cast<std::size_t>(op.root)] + blk.begin * es;
      m.ndst = 1;
      return m;
    }
    case coll::CollKind::AllGather: {
      MultiReduce m = copy_of(b.send[r], op.count * es);
      for (int k = 0; k < nranks; ++k) {
        std::uint8_t* at = b.recv[static_cast<std::size_t>(k)] + r * op.count * es;
        if (at != b.send[r]) m.dst[static_cast<std::size_t>(m.ndst++)] = at;  // in place: there
      }
      if (m.ndst == 0) return std::nullopt;
      return m;
    }
    case coll::CollKind::Broadcast: {
      const std::uint8_t* from = b.send[static_cast<std::size_t>(op.root)];
      if (b.recv[r] == from) return std::nullopt;  // the root, in place
      MultiReduce m = copy_of(from, op.count * es);
      m.dst[0] = b.recv[r];
      m.ndst = 1;
      return m;
    }
    default: return std::nullopt;
  }
}

}  // namespace loom::device
