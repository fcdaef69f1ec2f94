// fp16 kernels on the x86 F16C conversion instructions (vcvtph2ps / vcvtps2ph), selected at run
// time when the CPU has AVX + F16C. g++ 12 does not vectorise _Float16 conversions, and the
// portable bit-manipulation conversions in half.hpp cost ~15 instructions per element, so this is
// ~10x faster for fp16. Results are bit-identical to the portable path: the hardware converts
// with round-to-nearest-even (immediate rounding control, independent of MXCSR.RC), overflows to
// infinity, handles subnormals, and quiets NaNs keeping the top payload bits, exactly as
// half.hpp; the ops are the same selects/arithmetic in the same operand order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "loom/types.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && \
    !defined(LOOM_KERNELS_PORTABLE_ONLY)
#define LOOM_KERNELS_HAVE_F16C 1
#endif

#ifdef LOOM_KERNELS_HAVE_F16C
namespace loom::kernels::detail {

/// True when the CPU (and OS) support AVX and F16C; computed once.
bool cpu_has_f16c() noexcept;

/// dst[i] = a[i] op b[i] on fp16 bit patterns (Avg = PreMulSum = Sum; bitwise ops: nothing). dst
/// may be exactly a and/or b. Requires cpu_has_f16c().
void f16c_reduce(RedOp op, std::uint16_t* dst, const std::uint16_t* a, const std::uint16_t* b,
                 std::size_t count);

/// x[i] = x[i] / n computed in fp32 (n >= 1). Requires cpu_has_f16c().
void f16c_divide(std::uint16_t* x, std::size_t count, int n);

}  // namespace loom::kernels::detail
#endif
