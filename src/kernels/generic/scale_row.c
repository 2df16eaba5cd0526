/* scale_row (contract in kernels.h), written once for every ISA: full vectors, then the last
 * partial one. */
#include "kernels/generic/simd.h"

void MH_KNAME(scale_row)(size_t n, const float* x, float a, float* y) {
    const size_t vl = MH_VL, full = n - n % vl;
    const mh_vf va = mh_vset1(a);
    for (size_t i = 0; i < full; i += vl) mh_vstore(y + i, mh_vmul(mh_vload(x + i), va));
    if (full < n) mh_vstore_n(y + full, mh_vmul(mh_vload_n(x + full, n - full, 0.0f), va), n - full);
}
