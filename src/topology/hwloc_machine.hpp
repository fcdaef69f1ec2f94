// This machine's hwloc topology, loaded once per process, for the topology module's files.
#pragma once

#include <hwloc.h>

namespace loom::topo {

/// The hwloc topology of this machine with its important I/O devices, loaded at the first call
/// and kept for the process's life; nullptr when hwloc could not load one.
hwloc_topology_t hwloc_machine();

/// An hwloc bitmap freed at scope exit (`set` is nullptr when the allocation failed).
struct Bitmap {
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  Bitmap() = default;
  Bitmap(const Bitmap&) = delete;
  Bitmap& operator=(const Bitmap&) = delete;
  ~Bitmap() { hwloc_bitmap_free(set); }
};

}  // namespace loom::topo
