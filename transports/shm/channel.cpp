#include "transports/shm/channel.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <memory>
#include <string_view>

#include "common/process.hpp"
#include "common/socket.hpp"

namespace loom::transport::shm {

Channel::Channel(Mapping mapping, const ChannelGeometry& g)
    : mapping_(std::move(mapping)),
      geo_(g),
      header_(reinterpret_cast<ChannelHeader*>(mapping_.data())),
      descs_(reinterpret_cast<SlotDesc*>(mapping_.data() + g.desc_offset())),
      payload_(mapping_.data() + g.payload_offset()) {}

void init_channel(const Mapping& mapping, const ChannelGeometry& g, std::uint64_t comm_id, int from,
                  int to) {
  auto* h = std::construct_at(reinterpret_cast<ChannelHeader*>(mapping.data()));
  h->comm_id = comm_id;
  h->from_rank = from;
  h->to_rank = to;
  h->slot_bytes = g.slot_bytes;
  h->nslots = g.nslots;
  h->total_bytes = g.total_bytes();
  h->sender_pid = static_cast<std::int32_t>(::getpid());
  h->sender_pid_ns = proc::own_pid_namespace();
  h->sender_address = reinterpret_cast<std::uintptr_t>(mapping.data());
  auto* descs = reinterpret_cast<SlotDesc*>(mapping.data() + g.desc_offset());
  for (std::size_t i = 0; i < g.nslots; ++i) std::construct_at(descs + i);
}

Result<ChannelGeometry> check_channel(const Mapping& mapping, std::uint64_t comm_id, int from,
                                      int to) {
  const auto& h = *reinterpret_cast<const ChannelHeader*>(mapping.data());
  if (h.magic != kChannelMagic || h.version != kChannelVersion ||
      h.header_bytes != sizeof(ChannelHeader))
    return make_error(ErrorCode::Mismatch,
                      "rank {}: the shared-memory channel from rank {} has magic {:#x}, version "
                      "{}, header size {}; expected {:#x}, {}, {} (different loom versions?)",
                      to, from, h.magic, h.version, h.header_bytes, kChannelMagic, kChannelVersion,
                      sizeof(ChannelHeader));
  if (h.comm_id != comm_id || h.from_rank != from || h.to_rank != to)
    return make_error(ErrorCode::Mismatch,
                      "rank {}: the shared-memory channel published for rank {} belongs to "
                      "communicator {:#x}, rank {} -> rank {}; expected communicator {:#x}",
                      to, from, h.comm_id, h.from_rank, h.to_rank, comm_id);
  ChannelGeometry g{h.slot_bytes, h.nslots};
  if (!valid_geometry(g) || g.total_bytes() != h.total_bytes || g.total_bytes() != mapping.size())
    return make_error(ErrorCode::Mismatch,
                      "rank {}: the shared-memory channel from rank {} declares {} slots of {} "
                      "bytes ({} bytes), but its segment has {} bytes",
                      to, from, h.nslots, h.slot_bytes, h.total_bytes, mapping.size());
  return g;
}

namespace {

// True if `dir`/`name` is a loom segment of ours whose creator is gone: by the owner its name
// records (any content: a creator killed before it wrote the header leaves zeros), or, for names
// without one (loom before owner-tagged names), by the channel header's sender.
bool orphaned(const std::string& dir, const std::string& name, std::uint64_t own_comm_id) {
  net::Fd fd(::open((dir + "/" + name).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_uid != ::geteuid())
    return false;
  if (auto owner = parse_owner(name)) return owner_gone(*owner);
  if (static_cast<std::size_t>(st.st_size) < sizeof(ChannelHeader)) return false;
  // Read a copy: never map a file that another process may be changing.
  alignas(ChannelHeader) unsigned char raw[sizeof(ChannelHeader)];
  if (::pread(fd.get(), raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) return false;
  const auto& h = *reinterpret_cast<const ChannelHeader*>(raw);
  // sender_pid and sender_pid_ns sit at the same offsets in every channel version.
  if (h.magic != kChannelMagic || h.comm_id == own_comm_id || h.sender_pid <= 0 ||
      h.sender_pid_ns == 0 || h.sender_pid_ns != proc::own_pid_namespace() ||
      h.sender_pid == ::getpid())
    return false;
  return ::kill(h.sender_pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

std::vector<std::string> remove_orphaned_channels(std::uint64_t own_comm_id,
                                                  const std::string& dir) {
  std::vector<std::string> removed;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), &::closedir);
  if (!d) return removed;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d.get()))
    if (std::string_view(e->d_name).starts_with("loom-")) names.emplace_back(e->d_name);
  for (const std::string& name : names) {
    if (!orphaned(dir, name, own_comm_id)) continue;
    std::string path = dir;
    path.append("/").append(name);
    if (::unlink(path.c_str()) == 0) removed.push_back(name);
  }
  return removed;
}

}  // namespace loom::transport::shm
