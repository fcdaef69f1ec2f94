// `loomrun --hosts H`: H network namespaces standing in for H hosts. Each holds one end of a
// veth pair whose other end is enslaved to a bridge inside a further "switch" namespace; hosts
// get 10.199.0.(h+1)/24 on their eth0. Nothing is created in loomrun's own namespace, so the
// addresses exist only inside the job. Needs root and `ip` (iproute2).
#pragma once

#include <string>
#include <vector>

namespace loom::run {

class HostNamespaces {
 public:
  /// Creates the namespaces (removing leftovers of loomrun processes that no longer exist
  /// first). Throws RunError saying what is missing or which `ip` command failed, after
  /// removing whatever it had created.
  explicit HostNamespaces(int hosts);
  /// Removes every namespace it created.
  ~HostNamespaces();
  HostNamespaces(const HostNamespaces&) = delete;
  HostNamespaces& operator=(const HostNamespaces&) = delete;

  [[nodiscard]] int hosts() const { return static_cast<int>(names_.size()); }
  /// The namespace name of host h ("loom-1234-h0"); also its LOOM_HOST_ID.
  [[nodiscard]] const std::string& name(int host) const;
  /// Host h's address ("10.199.0.1").
  [[nodiscard]] static std::string address(int host);
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

/// Runs `ip ARGS...`; returns "" or the error output.
std::string run_ip(const std::vector<std::string>& args);

}  // namespace loom::run
