/* add_row (contract in kernels.h), written once for every ISA: full vectors, then the last
 * partial one. */
#include "kernels/generic/simd.h"

void MH_KNAME(add_row)(size_t n, const float* x, float* y) {
    const size_t vl = MH_VL, full = n - n % vl;
    for (size_t i = 0; i < full; i += vl) mh_vstore(y + i, mh_vadd(mh_vload(y + i), mh_vload(x + i)));
    if (full < n)
        mh_vstore_n(y + full, mh_vadd(mh_vload_n(y + full, n - full, 0.0f), mh_vload_n(x + full, n - full, 0.0f)),
                    n - full);
}
