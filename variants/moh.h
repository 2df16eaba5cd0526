/* MoH's entry point beyond mh_variant_ops: decode that also fills a routing record. */
#ifndef MH_VARIANTS_MOH_H
#define MH_VARIANTS_MOH_H
#include "variant.h"

/* mh_variant_moh.decode, filling `routing` when not NULL (arguments validated). */
void mh_moh_decode_routed(const mh_layer* layer, struct mh_kv_cache* cache, int batch, int n_new,
                          const float* x, float* out, mh_routing_record* routing, void* workspace);

#endif
