// TcpStoreServer: starts and stops the loop thread (tcp_store_loop.cpp, tcp_store_requests.cpp).
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>

#include "bootstrap/tcp_store.hpp"
#include "bootstrap/tcp_store_loop.hpp"
#include "log/log.hpp"

namespace loom::bootstrap {

int listen_backlog(int members) {
  constexpr int kMinBacklog = 1024;
  constexpr int kMaxBacklog = 65535;
  return std::clamp(members, kMinBacklog, kMaxBacklog);
}

struct TcpStoreServer::Impl {
  net::SocketAddress address;
  std::unique_ptr<server::Loop> loop;
  std::thread thread;
};

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(const net::SocketAddress& bind_addr,
                                                              std::uint64_t comm_id,
                                                              const crypto::Secret& secret,
                                                              const ServerOptions& options) {
  LOOM_ASSIGN_OR_RETURN(net::Fd listen_fd,
                        net::listen_on(bind_addr, listen_backlog(options.members)));
  return start_on(std::move(listen_fd), comm_id, secret, options);
}

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start_on(net::Fd listen_fd,
                                                                 std::uint64_t comm_id,
                                                                 const crypto::Secret& secret,
                                                                 const ServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  LOOM_ASSIGN_OR_RETURN(impl->address, net::bound_address(listen_fd.get()));
  net::Fd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return system_error(errno, "eventfd");
  const std::string addr = impl->address.to_string();
  impl->loop = std::make_unique<server::Loop>(std::move(listen_fd), std::move(wake), comm_id, addr,
                                              secret, options);
  try {
    impl->thread = std::thread([loop = impl->loop.get()] { loop->run(); });
  } catch (const std::system_error& e) {
    return make_error(ErrorCode::SystemError, "rendezvous server: cannot start thread: {}",
                      e.what());
  }
  LOOM_LOG_INFO(Bootstrap, "rendezvous server listening on {} (communicator id {:#x})", addr,
                comm_id);
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(impl)));
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TcpStoreServer::~TcpStoreServer() {
  const std::uint64_t one = 1;
  if (::write(impl_->loop->wake_fd(), &one, sizeof one) < 0) {
    LOOM_LOG_ERROR(Bootstrap, "rendezvous server: cannot wake the server thread: {}",
                   std::strerror(errno));
  }
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->loop->close_all();
  LOOM_LOG_DEBUG(Bootstrap, "rendezvous server at {} stopped", impl_->address.to_string());
}

const net::SocketAddress& TcpStoreServer::address() const {
  return impl_->address;
}

std::vector<StoreClientInfo> TcpStoreServer::clients() const {
  return impl_->loop->clients();
}

StoreLoad TcpStoreServer::load() const {
  return impl_->loop->load();
}

void TcpStoreServer::set_closing_reason(const std::string& why) {
  impl_->loop->set_closing_reason(why);
}

}  // namespace loom::bootstrap
