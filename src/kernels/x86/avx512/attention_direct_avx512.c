/* The AVX-512 direct kernels' entries for every head width: their bodies
 * (attention_direct_avx512.h), the entries (kernels/x86/attention_direct_entries.h). */
#include "kernels/x86/avx512/attention_direct_avx512.h"
#include "kernels/x86/attention_direct_entries.h"
