#include "api/validate.h"

#include <math.h>

#include "util/checked.h"

static int valid_dtype(mh_dtype t) {
    return t == MH_DTYPE_F32 || t == MH_DTYPE_F16 || t == MH_DTYPE_BF16 || t == MH_DTYPE_I8;
}

/* (n - 1) * stride, accumulated into *sum; 0 on overflow. */
static int add_span(int n, ptrdiff_t stride, size_t* sum) {
    size_t span;
    return mh_mul_size((size_t)(n - 1), (size_t)stride, &span) && mh_add_size(*sum, span, sum);
}

mh_status mh_validate_options(const mh_attn_options* opt, int batch, int n_q, int n_kv,
                              int n_heads) {
    if (opt->causal != 0 && opt->causal != 1) return MH_ERR_INVALID_ARGUMENT;
    if (opt->window < 0) return MH_ERR_INVALID_ARGUMENT;
    if (opt->q_offset != MH_Q_OFFSET_END && opt->q_offset < 0) return MH_ERR_INVALID_ARGUMENT;
    /* Positions q_offset + i and their distances to keys j < n_kv must fit int64_t. */
    if (opt->q_offset != MH_Q_OFFSET_END && opt->q_offset > INT64_MAX - n_q - n_kv)
        return MH_ERR_INVALID_ARGUMENT;
    if (!(opt->softcap >= 0.0f) || isinf(opt->softcap)) return MH_ERR_INVALID_ARGUMENT;
    if (opt->mask_stride_batch < 0 || opt->mask_stride_head < 0 || opt->mask_stride_row < 0)
        return MH_ERR_INVALID_ARGUMENT;
    if (opt->mask) { /* its largest index must be addressable */
        size_t last = (size_t)n_kv;
        if (!add_span(batch, opt->mask_stride_batch, &last) ||
            !add_span(n_heads, opt->mask_stride_head, &last) ||
            !add_span(n_q, opt->mask_stride_row, &last) || last > PTRDIFF_MAX / 4)
            return MH_ERR_SIZE_OVERFLOW;
    }
    if (opt->kv_len)
        for (int b = 0; b < batch; b++)
            if (opt->kv_len[b] < 0 || opt->kv_len[b] > n_kv) return MH_ERR_INVALID_ARGUMENT;
    if (opt->compute < MH_COMPUTE_DEFAULT || opt->compute >= MH_COMPUTE_COUNT) return MH_ERR_INVALID_ARGUMENT;
    /* Key positions kv_offset + j, and the queries' kv_offset + kv_len - N + i, must fit int64_t. */
    if (opt->kv_offset < 0 || opt->kv_offset > INT64_MAX - n_q - n_kv) return MH_ERR_INVALID_ARGUMENT;
    if (opt->lse && !mh_probs_fit(batch, n_heads, n_q, 1)) return MH_ERR_SIZE_OVERFLOW;
    if (opt->head_gates) { /* gathered rows have no per-row mask or probabilities */
        if (opt->mask || opt->probs) return MH_ERR_UNSUPPORTED;
        const size_t n = (size_t)batch * (size_t)n_q * (size_t)n_heads; /* Q's view bounds it */
        for (size_t i = 0; i < n; i++)
            if (!isfinite(opt->head_gates[i])) return MH_ERR_INVALID_ARGUMENT;
    }
    return MH_OK;
}

/* The largest element index a tensor view touches must fit in ptrdiff_t. */
static mh_status check_view(const mh_tensor* t, int batch, int tokens, int heads, int dim) {
    if (!t->data) return MH_ERR_INVALID_ARGUMENT;
    if (t->stride_batch < 0 || t->stride_token < 0 || t->stride_head < 0)
        return MH_ERR_INVALID_ARGUMENT;
    size_t last = (size_t)dim;
    if (!add_span(batch, t->stride_batch, &last) || !add_span(tokens, t->stride_token, &last) ||
        !add_span(heads, t->stride_head, &last) || last > PTRDIFF_MAX / 4)
        return MH_ERR_SIZE_OVERFLOW;
    return MH_OK;
}

/* A K or V view of storage dtype dt: the data as any view; int8 also needs its row scales, one
 * per (batch, token, head), whose largest index must fit like the data's. Other dtypes' scale
 * fields are not read. */
static mh_status check_kv_view(const mh_tensor* t, mh_dtype dt, int batch, int tokens, int heads, int dim) {
    const mh_status st = check_view(t, batch, tokens, heads, dim);
    if (st != MH_OK || dt != MH_DTYPE_I8) return st;
    if (!t->scale || t->scale_stride_batch < 0 || t->scale_stride_token < 0 || t->scale_stride_head < 0)
        return MH_ERR_INVALID_ARGUMENT;
    size_t last = 1;
    if (!add_span(batch, t->scale_stride_batch, &last) || !add_span(tokens, t->scale_stride_token, &last) ||
        !add_span(heads, t->scale_stride_head, &last) || last > PTRDIFF_MAX / 4)
        return MH_ERR_SIZE_OVERFLOW;
    return MH_OK;
}

/* 1 if no two elements of a written view share an address: ordered by stride, each dimension
 * (of extent > 1) must step past everything the inner ones span. */
static int view_disjoint(const mh_tensor* t, int batch, int tokens, int heads, int dim) {
    size_t stride[3] = {(size_t)t->stride_batch, (size_t)t->stride_token, (size_t)t->stride_head};
    int extent[3] = {batch, tokens, heads};
    for (int i = 0; i < 3; i++) /* sort by stride, ascending */
        for (int j = i + 1; j < 3; j++)
            if (stride[j] < stride[i]) {
                size_t s = stride[i];
                int e = extent[i];
                stride[i] = stride[j], extent[i] = extent[j], stride[j] = s, extent[j] = e;
            }
    size_t span = (size_t)dim; /* elements covered by the dimensions so far */
    for (int i = 0; i < 3; i++) {
        if (extent[i] == 1) continue;
        if (stride[i] < span) return 0;
        span = stride[i] * (size_t)(extent[i] - 1) + span; /* no overflow: check_view bounded it */
    }
    return 1;
}

mh_status mh_validate_problem(const mh_attn_problem* p) {
    if (p->batch <= 0 || p->n_q <= 0 || p->n_kv <= 0 || p->n_heads <= 0 || p->n_kv_heads <= 0 ||
        p->head_dim_qk <= 0 || p->head_dim_v <= 0)
        return MH_ERR_INVALID_ARGUMENT;
    if (p->n_heads % p->n_kv_heads != 0) return MH_ERR_INVALID_ARGUMENT;
    if (!valid_dtype(p->k_dtype) || !valid_dtype(p->v_dtype)) return MH_ERR_INVALID_ARGUMENT;
    if (!isfinite(p->scale) || !p->o.data) return MH_ERR_INVALID_ARGUMENT;
    mh_status st;
    if ((st = check_view(&p->q, p->batch, p->n_q, p->n_heads, p->head_dim_qk)) != MH_OK) return st;
    if ((st = check_kv_view(&p->k, p->k_dtype, p->batch, p->n_kv, p->n_kv_heads, p->head_dim_qk)) != MH_OK)
        return st;
    if ((st = check_kv_view(&p->v, p->v_dtype, p->batch, p->n_kv, p->n_kv_heads, p->head_dim_v)) != MH_OK)
        return st;
    mh_tensor o = {.data = p->o.data, .stride_batch = p->o.stride_batch, .stride_token = p->o.stride_token, .stride_head = p->o.stride_head};
    if ((st = check_view(&o, p->batch, p->n_q, p->n_heads, p->head_dim_v)) != MH_OK) return st;
    return view_disjoint(&o, p->batch, p->n_q, p->n_heads, p->head_dim_v) ? MH_OK
                                                                          : MH_ERR_INVALID_ARGUMENT;
}

int mh_probs_fit(int batch, int n_heads, int n_q, int n_kv) {
    size_t n;
    return mh_mul3_size((size_t)batch, (size_t)n_heads, (size_t)n_q, &n) &&
           mh_mul3_size(n, (size_t)n_kv, sizeof(float), &n) && n <= PTRDIFF_MAX;
}
