/* The AVX2 direct kernels compiled again for head width 64 alone (kernel_protos.h,
 * MH_DIRECT_W64; nothing under AddressSanitizer). */
#define MH_DIRECT_COPY_W64 1
#include "kernels/kernel_protos.h"
#if MH_DIRECT_W64
#include "kernels/x86/avx2/attention_direct_avx2.h"
#include "kernels/x86/attention_direct_entries.h"
#endif
