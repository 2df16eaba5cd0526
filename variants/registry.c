/* The compiled-in variants. Adding one: a file under variants/, one line here. */
#include <string.h>

#include "variant.h"

extern const mh_variant_ops mh_variant_mha, mh_variant_gqa, mh_variant_mqa;
extern const mh_variant_ops mh_variant_overlap;
extern const mh_variant_ops mh_variant_moh;
extern const mh_variant_ops mh_variant_collab;
extern const mh_variant_ops mh_variant_dcmha;

mh_layer_config mh_layer_config_default(void) {
    mh_layer_config c;
    memset(&c, 0, sizeof c);
    c.variant = MH_VARIANT_MHA;
    return c;
}

const mh_variant_ops* mh_variant_lookup(mh_variant v) {
    switch (v) {
    case MH_VARIANT_MHA: return &mh_variant_mha;
    case MH_VARIANT_GQA: return &mh_variant_gqa;
    case MH_VARIANT_MQA: return &mh_variant_mqa;
    case MH_VARIANT_OVERLAP: return &mh_variant_overlap;
    case MH_VARIANT_MOH: return &mh_variant_moh;
    case MH_VARIANT_COLLAB: return &mh_variant_collab;
    case MH_VARIANT_DCMHA: return &mh_variant_dcmha;
    default: return NULL; /* not (yet) built: mh_layer_create says MH_ERR_INVALID_ARGUMENT */
    }
}
