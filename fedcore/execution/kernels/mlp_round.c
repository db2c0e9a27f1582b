/* One round of local training of every site's MLP, site after site (fedcore/execution/kernels/__init__.py).

   The batched path in torch (fedcore/execution/stacked.py) steps all sites together, so every step streams
   all sites' weights, gradients and momentum through memory, and pays a few dozen operations'
   overhead. Here each site runs all of its steps of the round before the next site starts: its
   weights, momentum and activations (a few hundred KB for the paper's MLP) stay in the core's
   cache for the whole round, and a step is a handful of small matrix products (the BLAS that
   torch already carries, passed in as a function pointer) and plain loops. Sites are independent
   within a round, so threads take whole sites.

   The equations are those of fedcore/execution/stacked.py's pass, layer by layer; a step uses only its
   valid rows (padding rows contribute nothing there either). The SGD update is torch's (momentum,
   no dampening, weight decay), applied to a layer's tensors as soon as the gradient below it has
   been taken; a weight matrix's gradient goes straight into its momentum (the product's beta). */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Fortran BLAS sgemm (column-major). */
typedef void (*sgemm_t)(const char *, const char *, const int *, const int *, const int *, const float *,
                        const float *, const int *, const float *, const int *, const float *, float *, const int *);

/* MKL's MKL_Set_Num_Threads_Local: the calling thread's BLAS threads (0: the process's setting),
   returning the previous value. */
typedef int (*blas_threads_t)(int);

/* The layer kinds and the Layer and Round structs: written at build time by
   fedcore/execution/kernels/__init__.py from the one Python description ctypes also reads, so the
   two sides cannot disagree on a field, its order or a constant. */
#include "mlp_round.h"

/* exp written to vectorise (Cephes' polynomial, within 2 ulp), so that tanh costs little. */
static inline float exp_approx(float x) {
    x = x < -87.3f ? -87.3f : (x > 88.3f ? 88.3f : x);
    float n = floorf(x * 1.44269504088896341f + 0.5f);
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* out = h * w feature by feature over m rows of n (w one scalar when `scalar`); out may be h. */
static void scale(float *out, const float *h, const float *w, int scalar, int m, int n) {
    for (int i = 0; i < m; i++) {
        const float *in = h + (size_t)i * n;
        float *o = out + (size_t)i * n;
        if (scalar)
            for (int j = 0; j < n; j++) o[j] = in[j] * w[0];
        else
            for (int j = 0; j < n; j++) o[j] = in[j] * w[j];
    }
}

/* out = h * keep * keep_scale, row by row (keep: a step's mask rows, `stride` apart); out may be h. */
static void drop(float *out, const float *h, const uint8_t *keep, int m, int n, int stride, float keep_scale) {
    for (int i = 0; i < m; i++) {
        const uint8_t *restrict k = keep + (size_t)i * stride;
        const float *in = h + (size_t)i * n;
        float *o = out + (size_t)i * n;
        for (int j = 0; j < n; j++) o[j] = in[j] * ((float)k[j] * keep_scale);
    }
}

/* Workspace of one thread: the step's input rows and dropout masks, every layer's output and what
   its backward needs, two gradient buffers (one layer's input and output side) and two tensors'
   gradients. */
typedef struct {
    float *input, **out, **saved, **inverse_std, *grad[2], *tensor_grad[2];
    uint8_t *keep; /* [batch, mask_width] */
} Work;

static int widest(const Round *r) {
    int w = r->features;
    for (int l = 0; l < r->layers; l++) w = r->layer[l].outputs > w ? r->layer[l].outputs : w;
    return w;
}

static int work_alloc(Work *w, const Round *r) {
    size_t n = (size_t)r->batch * widest(r), width = widest(r);
    w->input = malloc(n * sizeof(float));
    w->keep = malloc((size_t)r->batch * r->mask_width + 1);
    w->out = calloc(r->layers, sizeof(float *));
    w->saved = calloc(r->layers, sizeof(float *));
    w->inverse_std = calloc(r->layers, sizeof(float *));
    for (int k = 0; k < 2; k++) {
        w->grad[k] = malloc(n * sizeof(float));
        w->tensor_grad[k] = malloc(width * sizeof(float));
        if (!w->grad[k] || !w->tensor_grad[k]) return -1;
    }
    if (!w->input || !w->keep || !w->out || !w->saved || !w->inverse_std) return -1;
    for (int l = 0; l < r->layers; l++) {
        w->out[l] = malloc(n * sizeof(float));
        w->saved[l] = malloc(n * sizeof(float));
        w->inverse_std[l] = malloc(width * sizeof(float));
        if (!w->out[l] || !w->saved[l] || !w->inverse_std[l]) return -1;
    }
    return 0;
}

static void work_free(Work *w, const Round *r) {
    for (int l = 0; w->out && l < r->layers; l++) {
        free(w->out[l]);
        free(w->saved[l]);
        free(w->inverse_std[l]);
    }
    free(w->input); free(w->keep); free(w->out); free(w->saved); free(w->inverse_std);
    for (int k = 0; k < 2; k++) {
        free(w->grad[k]);
        free(w->tensor_grad[k]);
    }
}

/* SGD with momentum on n values given their gradient g: torch's update (no dampening). */
static void sgd(float *p, float *momentum, const float *g, int64_t n, const Round *r) {
    for (int64_t i = 0; i < n; i++) {
        momentum[i] = r->momentum * momentum[i] + (g[i] + r->weight_decay * p[i]);
        p[i] -= r->lr * momentum[i];
    }
}

/* The same when the product already left momentum * old momentum + gradient in the momentum. */
static void sgd_fused(float *p, float *momentum, int64_t n, const Round *r) {
    for (int64_t i = 0; i < n; i++) {
        momentum[i] += r->weight_decay * p[i];
        p[i] -= r->lr * momentum[i];
    }
}

/* numpy's PCG64: a 128-bit LCG stepped, then its XSL-RR output (what random_raw returns). */
typedef unsigned __int128 u128;
static const u128 PCG64_MULTIPLIER = ((u128)0x2360ED051FC65DA4ULL << 64) | 0x4385DF649FCCF645ULL;

static inline uint64_t pcg64_next(u128 *state, u128 increment) {
    *state = *state * PCG64_MULTIPLIER + increment;
    uint64_t folded = (uint64_t)(*state >> 64) ^ (uint64_t)*state;
    unsigned rotation = (unsigned)(*state >> 122);
    return (folded >> rotation) | (folded << ((64 - rotation) & 63));
}

/* One step's masks of a site, [batch, mask_width], drawn as fedcore.execution.stacked.DropoutMasks.keep draws
   them: each 64-bit draw gives four 16-bit decisions (low bits first), leftovers discarded. */
static void draw_masks(const Round *r, uint8_t *keep, u128 *state, u128 increment) {
    size_t n = (size_t)r->batch * r->mask_width;
    for (size_t i = 0; i < n; i += 4) {
        uint64_t draw = pcg64_next(state, increment);
        for (size_t q = 0; q < 4 && i + q < n; q++) keep[i + q] = ((draw >> (16 * q)) & 0xFFFF) < (uint64_t)r->keep_below;
    }
}

static void forward(const Round *r, Work *w, int site, int m) {
    /* the step's rows are in w->input; in training its dropout masks are in w->keep */
    const float *h = w->input;
    const uint8_t *masks = r->streams ? w->keep : NULL;
    for (int l = 0; l < r->layers; l++) {
        const Layer *L = &r->layer[l];
        float *out = w->out[l];
        /* the layer's tensors: affine (b, w), linear (weight [out, in], bias), batch norm (weight, bias) */
        const float *first = L->tensor[0] ? L->tensor[0] + site * L->size[0] : NULL;
        const float *second = L->tensor[1] ? L->tensor[1] + site * L->size[1] : NULL;
        int n = L->inputs, o = L->outputs;
        switch (L->kind) {
        case AFFINE: { /* (h + b) * w, w perhaps one scalar */
            float *restrict shifted = w->saved[l];
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) shifted[i * n + j] = h[i * n + j] + first[j];
            scale(out, shifted, second, L->size[1] == 1, m, n);
            break;
        }
        case DROPOUT:
            if (masks) {
                drop(out, h, masks + L->mask_offset, m, n, r->mask_width, r->keep_scale);
            } else {
                memcpy(out, h, sizeof(float) * m * n);
            }
            break;
        case LINEAR: { /* h W^T + bias */
            const float one = 1.0f;
            for (int i = 0; i < m; i++) memcpy(out + i * o, second, sizeof(float) * o);
            r->sgemm("T", "N", &o, &m, &n, &one, first, &n, h, &n, &one, out, &o);
            break;
        }
        case BATCH_NORM: { /* over the step's rows (never fewer than two: the plan skips smaller batches) */
            float *running_mean = L->running_mean + (size_t)site * o, *running_var = L->running_var + (size_t)site * o;
            if (!r->training) {
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < o; j++)
                        out[i * o + j] = (h[i * o + j] - running_mean[j]) / sqrtf(running_var[j] + L->eps) * first[j]
                                         + second[j];
                break;
            }
            float *normalised = w->saved[l], *inverse_std = w->inverse_std[l];
            for (int j = 0; j < o; j++) {
                float mean = 0.0f, variance = 0.0f;
                for (int i = 0; i < m; i++) mean += h[i * o + j];
                mean /= m;
                for (int i = 0; i < m; i++) variance += (h[i * o + j] - mean) * (h[i * o + j] - mean);
                variance /= m;
                inverse_std[j] = 1.0f / sqrtf(variance + L->eps);
                for (int i = 0; i < m; i++) {
                    normalised[i * o + j] = (h[i * o + j] - mean) * inverse_std[j];
                    out[i * o + j] = normalised[i * o + j] * first[j] + second[j];
                }
                running_mean[j] = (1 - L->bn_momentum) * running_mean[j] + L->bn_momentum * mean;
                running_var[j] = (1 - L->bn_momentum) * running_var[j] + L->bn_momentum * variance * m / (m - 1);
            }
            L->tracked[site] += 1;
            break;
        }
        case TANH: /* 2 sigmoid(2x) - 1, as the torch path computes it */
            for (int i = 0; i < m * n; i++) {
                float e = exp_approx(-2.0f * h[i]);
                out[i] = 2.0f / (1.0f + e) - 1.0f;
            }
            break;
        }
        h = out;
    }
}

/* log sum_c exp(z_c), from the largest z_c so that nothing overflows: log_softmax(z) = z - this. */
static float log_normaliser(const float *z, int k) {
    float top = z[0], sum = 0.0f;
    for (int c = 1; c < k; c++) top = fmaxf(top, z[c]);
    for (int c = 0; c < k; c++) sum += expf(z[c] - top);
    return top + logf(sum);
}

/* The class-weighted NLL of log_softmax(z) (its return) and its gradient with respect to z, into g. */
static float loss_gradient(const Round *r, int site, const int64_t *rows, int m, const float *z, float *g) {
    int k = r->classes;
    const int64_t *y = r->y + (size_t)site * r->rows_per_site;
    const float *class_weight = r->class_weights ? r->class_weights + (size_t)site * k : NULL;
    float total_weight = 0.0f, loss = 0.0f;
    for (int i = 0; i < m; i++) total_weight += class_weight ? class_weight[y[rows[i]]] : 1.0f;
    float reduction = r->mean_reduction ? 1.0f / fmaxf(total_weight, 1e-12f) : 1.0f;
    for (int i = 0; i < m; i++) {
        const float *zi = z + i * k;
        int target = (int)y[rows[i]];
        float normaliser = log_normaliser(zi, k);
        float row_weight = (class_weight ? class_weight[target] : 1.0f) * reduction;
        for (int c = 0; c < k; c++) g[i * k + c] = row_weight * expf(zi[c] - normaliser);
        g[i * k + target] -= row_weight;
        loss -= row_weight * (zi[target] - normaliser);
    }
    return loss;
}

/* From the output's gradient g (in grad[0]) down to the lowest trained layer; a layer's tensors
   take their SGD step once the gradient below the layer has been taken with them. */
static void backward(const Round *r, Work *w, int site, int m) {
    const uint8_t *masks = r->streams ? w->keep : NULL;
    float *g = w->grad[0], *spare = w->grad[1];
    float *g_first = w->tensor_grad[0], *g_second = w->tensor_grad[1];
    for (int l = r->layers - 1; l >= r->lowest; l--) {
        const Layer *L = &r->layer[l];
        int below = l > r->lowest, n = L->inputs, o = L->outputs;
        float *first = L->tensor[0] ? L->tensor[0] + site * L->size[0] : NULL;
        float *second = L->tensor[1] ? L->tensor[1] + site * L->size[1] : NULL;
        /* their momentum where they are trained (tensor_grad: their gradients) */
        float *first_momentum = L->momentum[0] ? L->momentum[0] + site * L->size[0] : NULL;
        float *second_momentum = L->momentum[1] ? L->momentum[1] + site * L->size[1] : NULL;
        const float *h = l > 0 ? w->out[l - 1] : w->input;
        switch (L->kind) {
        case AFFINE: {
            const float *restrict shifted = w->saved[l];
            int scalar = L->size[1] == 1;
            for (int j = 0; j < n; j++) g_first[j] = g_second[j] = 0.0f;
            for (int i = 0; i < m; i++) {
                const float *restrict gi = g + (size_t)i * n, *restrict si = shifted + (size_t)i * n;
                for (int j = 0; j < n; j++) {
                    g_first[j] += gi[j];
                    g_second[j] += gi[j] * si[j];
                }
            }
            if (scalar)
                for (int j = 1; j < n; j++) g_second[0] += g_second[j];
            scale(g_first, g_first, second, scalar, 1, n);
            if (below) scale(g, g, second, scalar, m, n);
            if (first_momentum) sgd(first, first_momentum, g_first, L->size[0], r);
            if (second_momentum) sgd(second, second_momentum, g_second, L->size[1], r);
            break;
        }
        case DROPOUT:
            if (masks && below) drop(g, g, masks + L->mask_offset, m, n, r->mask_width, r->keep_scale);
            break;
        case LINEAR: {
            const float one = 1.0f, zero = 0.0f, beta = r->momentum;
            if (below) r->sgemm("N", "N", &n, &m, &o, &one, first, &n, g, &o, &zero, spare, &n);
            if (first_momentum) {
                r->sgemm("N", "T", &n, &o, &m, &one, h, &n, g, &o, &beta, first_momentum, &n);
                sgd_fused(first, first_momentum, L->size[0], r);
            }
            if (second_momentum) {
                for (int j = 0; j < o; j++) g_second[j] = 0.0f;
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < o; j++) g_second[j] += g[i * o + j];
                sgd(second, second_momentum, g_second, o, r);
            }
            if (below) {
                float *t = g;
                g = spare;
                spare = t;
            }
            break;
        }
        case BATCH_NORM: {
            const float *normalised = w->saved[l], *inverse_std = w->inverse_std[l];
            for (int j = 0; j < o; j++) {
                float g_weight = 0.0f, g_bias = 0.0f;
                for (int i = 0; i < m; i++) {
                    g_weight += g[i * o + j] * normalised[i * o + j];
                    g_bias += g[i * o + j];
                }
                g_first[j] = g_weight;
                g_second[j] = g_bias;
                if (below) {
                    float mean_g = g_bias * first[j] / m, mean_g_normalised = g_weight * first[j] / m;
                    for (int i = 0; i < m; i++)
                        g[i * o + j] = (g[i * o + j] * first[j] - mean_g - normalised[i * o + j] * mean_g_normalised)
                                       * inverse_std[j];
                }
            }
            if (first_momentum) sgd(first, first_momentum, g_first, o, r);
            if (second_momentum) sgd(second, second_momentum, g_second, o, r);
            break;
        }
        case TANH: {
            const float *y = w->out[l];
            for (int i = 0; i < m * n; i++) g[i] *= 1.0f - y[i] * y[i];
            break;
        }
        }
    }
}

static float train_site(const Round *r, Work *w, int site) {
    float total = 0.0f;
    const float *x = r->x + site * r->x_site_stride;
    uint64_t *stream = r->streams ? r->streams + 4 * (size_t)site : NULL;
    u128 state = stream ? ((u128)stream[1] << 64) | stream[0] : 0;
    u128 increment = stream ? ((u128)stream[3] << 64) | stream[2] : 0;
    for (int step = 0; step < r->max_steps; step++) {
        int m = r->counts[(size_t)site * r->max_steps + step];
        if (m == 0) break;
        const int64_t *rows = r->rows + ((size_t)site * r->max_steps + step) * r->batch;
        for (int i = 0; i < m; i++) memcpy(w->input + (size_t)i * r->features, x + rows[i] * r->features,
                                           sizeof(float) * r->features);
        if (stream) draw_masks(r, w->keep, &state, increment);
        forward(r, w, site, m);
        total += loss_gradient(r, site, rows, m, w->out[r->layers - 1], w->grad[0]);
        backward(r, w, site, m);
    }
    if (stream) {
        stream[0] = (uint64_t)state;
        stream[1] = (uint64_t)(state >> 64);
    }
    return total;
}

/* Every site's log-probabilities [sites, rows_per_site, classes] of its first counts[site] rows,
   in chunks of `batch` rows (the rest of `log_prob` is left as it was). */
static void predict_site(const Round *r, Work *w, int site, float *log_prob) {
    const float *x = r->x + site * r->x_site_stride;
    int k = r->classes, rows = r->counts[site];
    for (int start = 0; start < rows; start += r->batch) {
        int m = rows - start < r->batch ? rows - start : r->batch;
        memcpy(w->input, x + (size_t)start * r->features, sizeof(float) * m * r->features);
        forward(r, w, site, m);
        const float *z = w->out[r->layers - 1];
        float *out = log_prob + ((size_t)site * r->rows_per_site + start) * k;
        for (int i = 0; i < m; i++) {
            float normaliser = log_normaliser(z + i * k, k);
            for (int c = 0; c < k; c++) out[i * k + c] = z[i * k + c] - normaliser;
        }
    }
}

/* Runs site_work for every site, threads taking whole sites; 0, or -1 when a thread's workspace
   could not be allocated (its sites left untouched). Each thread's matrix products run on that
   thread alone: they are small, and where the threads here are fewer than the process's (one
   site: FedHealth2's server model, a federation's last site) MKL would otherwise split every
   product among threads that then wait on each other, about ten times slower a step. */
static int each_site(const Round *r, void (*site_work)(const Round *, Work *, int, float *), float *out) {
    int failed = 0;
#pragma omp parallel num_threads(r->threads) reduction(| : failed)
    {
        Work w = {0};
        int blas_before = r->blas_threads ? r->blas_threads(1) : 0;
        failed = work_alloc(&w, r) != 0;
#pragma omp for schedule(dynamic, 1)
        for (int site = 0; site < r->sites; site++)
            if (!failed) site_work(r, &w, site, out);
        work_free(&w, r);
        if (r->blas_threads) r->blas_threads(blas_before);
    }
    return failed ? -1 : 0;
}

static void train_site_loss(const Round *r, Work *w, int site, float *losses) {
    losses[site] = train_site(r, w, site);
}

/* One round of local training: every site's tensors, momentum and BatchNorm statistics move in
   place; losses[site] gets the sum of its steps' losses. */
int train_round(const Round *r, float *losses) { return each_site(r, train_site_loss, losses); }

/* Every site's model on its rows: log-probabilities into log_prob [sites, rows_per_site, classes]. */
int predict(const Round *r, float *log_prob) { return each_site(r, predict_site, log_prob); }
