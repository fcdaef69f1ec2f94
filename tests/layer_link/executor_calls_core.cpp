// Planted for ctest's process.layer_link, never part of the library: the executor calling the
// communicator (src/core), a layer above it, through the public API. The include check cannot
// see this call (include/loom is below every layer); the link check must: linking
// loom_layer_plant_executor fails with an undefined reference to loom::Communicator::rank().
#include "loom/communicator.hpp"

namespace loom::exec {

int planted_upward_call(const Communicator& comm) {
  return comm.rank();
}

}  // namespace loom::exec
