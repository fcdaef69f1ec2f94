// The status report on a signal (LOOM_STATUS_SIGNAL=1): SIGUSR1 prints every live
// communicator's status() to stderr. The handler only writes a byte to a self-pipe; a thread
// reads it and prints, so nothing unsafe runs in signal context.
#pragma once

namespace loom::detail {

class CommImpl;

/// Installs the SIGUSR1 handler and its printing thread (once per process). Refused, with a
/// warning, when the application already handles or ignores SIGUSR1.
void enable_status_signal();
/// Live communicators, printed on the signal (registration is cheap; always done).
void register_for_status(const CommImpl* comm);
void unregister_for_status(const CommImpl* comm);

}  // namespace loom::detail
