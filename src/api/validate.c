#include "api/validate.h"

#include <math.h>

#include "util/checked.h"

static int valid_dtype(mh_dtype t) {
    return t == MH_DTYPE_F32 || t == MH_DTYPE_F16 || t == MH_DTYPE_BF16;
}

mh_status mh_validate_options(const mh_attn_options* opt, int batch, int n_q, int n_kv,
                              int n_heads) {
    (void)n_q, (void)n_heads;
    if (opt->causal != 0 && opt->causal != 1) return MH_ERR_INVALID_ARGUMENT;
    if (opt->window < 0) return MH_ERR_INVALID_ARGUMENT;
    if (opt->q_offset != MH_Q_OFFSET_END && opt->q_offset < 0) return MH_ERR_INVALID_ARGUMENT;
    if (!(opt->softcap >= 0.0f) || isinf(opt->softcap)) return MH_ERR_INVALID_ARGUMENT;
    if (opt->mask_stride_batch < 0 || opt->mask_stride_head < 0 || opt->mask_stride_row < 0)
        return MH_ERR_INVALID_ARGUMENT;
    if (opt->kv_len)
        for (int b = 0; b < batch; b++)
            if (opt->kv_len[b] < 0 || opt->kv_len[b] > n_kv) return MH_ERR_INVALID_ARGUMENT;
    return MH_OK;
}

/* The largest element index a tensor view touches must fit in ptrdiff_t. */
static mh_status check_view(const mh_tensor* t, int batch, int tokens, int heads, int dim) {
    if (!t->data) return MH_ERR_INVALID_ARGUMENT;
    if (t->stride_batch < 0 || t->stride_token < 0 || t->stride_head < 0)
        return MH_ERR_INVALID_ARGUMENT;
    size_t a, b, c, sum;
    if (!mh_mul_size((size_t)(batch - 1), (size_t)t->stride_batch, &a) ||
        !mh_mul_size((size_t)(tokens - 1), (size_t)t->stride_token, &b) ||
        !mh_mul_size((size_t)(heads - 1), (size_t)t->stride_head, &c) || !mh_add_size(a, b, &sum) ||
        !mh_add_size(sum, c, &sum) || !mh_add_size(sum, (size_t)dim, &sum) || sum > PTRDIFF_MAX / 4)
        return MH_ERR_SIZE_OVERFLOW;
    return MH_OK;
}

mh_status mh_validate_problem(const mh_attn_problem* p) {
    if (p->batch <= 0 || p->n_q <= 0 || p->n_kv <= 0 || p->n_heads <= 0 || p->n_kv_heads <= 0 ||
        p->head_dim_qk <= 0 || p->head_dim_v <= 0)
        return MH_ERR_INVALID_ARGUMENT;
    if (p->n_heads % p->n_kv_heads != 0) return MH_ERR_INVALID_ARGUMENT;
    if (!valid_dtype(p->k_dtype) || !valid_dtype(p->v_dtype)) return MH_ERR_INVALID_ARGUMENT;
    if (!isfinite(p->scale) || !p->o) return MH_ERR_INVALID_ARGUMENT;
    mh_status st;
    if ((st = check_view(&p->q, p->batch, p->n_q, p->n_heads, p->head_dim_qk)) != MH_OK) return st;
    if ((st = check_view(&p->k, p->batch, p->n_kv, p->n_kv_heads, p->head_dim_qk)) != MH_OK) return st;
    if ((st = check_view(&p->v, p->batch, p->n_kv, p->n_kv_heads, p->head_dim_v)) != MH_OK) return st;
    mh_tensor o = {p->o, p->o_stride_batch, p->o_stride_token, p->o_stride_head};
    return check_view(&o, p->batch, p->n_q, p->n_heads, p->head_dim_v);
}

int mh_probs_fit(int batch, int n_heads, int n_q, int n_kv) {
    size_t n;
    return mh_mul3_size((size_t)batch, (size_t)n_heads, (size_t)n_q, &n) &&
           mh_mul3_size(n, (size_t)n_kv, sizeof(float), &n) && n <= PTRDIFF_MAX;
}
