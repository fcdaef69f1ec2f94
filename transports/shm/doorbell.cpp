#include "transports/shm/doorbell.hpp"

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "transports/shm/shm_segment.hpp"

namespace loom::transport::shm {

Result<DoorbellAddress> DoorbellAddress::from_name(const std::string& name) {
  DoorbellAddress a;
  bool printable = true;
  for (char c : name) printable = printable && c > ' ' && c < 0x7f;
  if (name.rfind("loom-", 0) != 0 || !printable || name.size() + 1 > sizeof(a.addr_.sun_path))
    return make_error(ErrorCode::Mismatch, "malformed shared-memory doorbell name '{}'", name);
  a.addr_.sun_family = AF_UNIX;
  a.addr_.sun_path[0] = '\0';  // abstract namespace: no file, gone with the socket
  std::memcpy(a.addr_.sun_path + 1, name.data(), name.size());
  a.len_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

Result<std::shared_ptr<Doorbell>> Doorbell::create(std::uint64_t comm_id, int rank) {
  LOOM_ASSIGN_OR_RETURN(std::string nonce, random_hex(16));
  std::string name = fmt::format("loom-{:016x}-{}-{}", comm_id, rank, nonce);
  LOOM_ASSIGN_OR_RETURN(DoorbellAddress addr, DoorbellAddress::from_name(name));
  net::Fd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return system_error(errno, "doorbell socket");
  if (::bind(fd.get(), addr.raw(), addr.len()) != 0)
    return system_error(errno, "binding doorbell @" + name);
  return std::shared_ptr<Doorbell>(new Doorbell(std::move(fd), std::move(name)));
}

void Doorbell::ring(const DoorbellAddress& to) const {
  const char byte = 1;
  (void)::sendto(fd_.get(), &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL, to.raw(), to.len());
}

Status Doorbell::probe(const DoorbellAddress& to, int peer) const {
  const char byte = 1;
  if (::sendto(fd_.get(), &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL, to.raw(), to.len()) >= 0 ||
      errno == EAGAIN || errno == EWOULDBLOCK)
    return Status::ok();
  return system_error(errno, fmt::format("cannot reach the doorbell of rank {} (is it in another "
                                         "network namespace? then use the tcp transport)",
                                         peer));
}

void Doorbell::drain() const {
  char buf[64];
  while (::recv(fd_.get(), buf, sizeof buf, MSG_DONTWAIT) >= 0) {
  }
}

}  // namespace loom::transport::shm
