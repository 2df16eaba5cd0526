/* The AVX2 direct kernels' entries for every head width: their bodies
 * (attention_direct_avx2.h), the entries (kernels/x86/attention_direct_entries.h). */
#include "kernels/x86/avx2/attention_direct_avx2.h"
#include "kernels/x86/attention_direct_entries.h"
