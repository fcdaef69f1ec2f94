// Planted for ctest's process.layer_link, never part of the library: common naming a data type
// with loom::to_string(DataType), which the vocabulary layer (src/collective/types.cpp) defines,
// above common. Linking loom_layer_plant_common fails with an undefined reference to it.
#include <string_view>

#include "loom/types.hpp"

namespace loom {

std::string_view planted_upward_call(DataType t) {
  return to_string(t);
}

}  // namespace loom
