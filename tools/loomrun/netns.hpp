// `loomrun --hosts H`: H network namespaces standing in for H hosts. Each holds one end of a
// veth pair whose other end is enslaved to a bridge inside a further "switch" namespace; hosts
// get 10.199.0.(h+1)/24 on their eth0. With --nics K each host has eth0..eth(K-1), interface i
// on its own bridge and network 10.199.i.0/24 (several NICs per host); --nic-rate caps each
// interface's egress with a tc token bucket. Nothing is created in loomrun's own namespace, so
// the addresses exist only inside the job. Needs root and `ip` (iproute2; `tc` for the rate).
#pragma once

#include <string>
#include <vector>

namespace loom::run {

/// The network of each namespace host.
struct HostNetwork {
  int nics = 1;      // interfaces per host
  std::string rate;  // tc rate of each interface's egress ("" : unlimited)
};

class HostNamespaces {
 public:
  /// Creates the namespaces (removing leftovers of loomrun processes that no longer exist
  /// first). Throws RunError saying what is missing or which `ip` command failed, after
  /// removing whatever it had created.
  explicit HostNamespaces(int hosts, const HostNetwork& net = {});
  /// Removes every namespace it created.
  ~HostNamespaces();
  HostNamespaces(const HostNamespaces&) = delete;
  HostNamespaces& operator=(const HostNamespaces&) = delete;

  [[nodiscard]] int hosts() const { return static_cast<int>(names_.size()); }
  /// The namespace name of host h ("loom-1234-h0"); also its LOOM_HOST_ID.
  [[nodiscard]] const std::string& name(int host) const;
  /// Host h's address on interface `nic` ("10.199.0.1" for eth0).
  [[nodiscard]] static std::string address(int host, int nic = 0);
  /// Deletes the namespaces now (idempotent, never throws).
  void remove() noexcept;

 private:
  std::string prefix_;
  std::string switch_;
  std::vector<std::string> names_;
  std::vector<std::string> created_;
};

/// Why --hosts cannot run here ("" when it can): not root, or no `ip` command.
std::string namespaces_unsupported();

/// Runs `PROGRAM ARGS...` (from PATH); returns "" or the error output.
std::string run_program(const std::string& program, const std::vector<std::string>& args);
/// Runs `ip ARGS...`; returns "" or the error output.
std::string run_ip(const std::vector<std::string>& args);

}  // namespace loom::run
