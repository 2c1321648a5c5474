/*
 * tacl's compressed collectives (docs/design/compression.md) for the
 * torch binding: the codec found by name and checked before anything is
 * sent, the scheme resolved ("auto": the lowest tacl_comp_estimate among
 * those the codec takes), then the blocking call.  A bad argument is a
 * ValueError naming it; a failure of the call a DistBackendError with
 * tacl's message.
 */
#include "compress.h"

#include <limits>

#include <c10/util/Exception.h>

namespace tacl_torch {

/* Raise with tacl's message: bad arguments as ValueError. */
[[noreturn]] static void comp_fail(const std::string &what, tacl_comm_t comm,
                                   tacl_status_t s)
{
    std::string m = "tacl: " + what + ": " + tacl_message(comm, s);
    if (s == TACL_ERR_INVALID_ARG)
        C10_THROW_ERROR(ValueError, m);
    C10_THROW_ERROR(DistBackendError, m);
}

static tacl_codec_params_t params_of(const CodecArgs &c)
{
    tacl_codec_params_t p{};
    p.density = c.density;
    p.bits = c.bits;
    TORCH_CHECK_VALUE(c.block >= 0 &&
                          c.block <= std::numeric_limits<uint32_t>::max(),
                      "tacl: codec ", c.name, ": block ", c.block,
                      " is outside [0, 2^32)");
    p.block = static_cast<uint32_t>(c.block);
    p.seed = c.seed;
    return p;
}

/* The codec called c.name, its parameters checked. */
static const tacl_codec_t *codec_of(const CodecArgs &c,
                                    tacl_codec_params_t *params_p)
{
    const tacl_codec_t *codec = nullptr;
    tacl_status_t s = tacl_codec_find(c.name.c_str(), &codec);
    if (s != TACL_OK)
        comp_fail("codec", nullptr, s);
    *params_p = params_of(c);
    s = tacl_codec_check(codec, params_p);
    if (s != TACL_OK)
        comp_fail("codec " + c.name, nullptr, s);
    return codec;
}

void codec_check(const CodecArgs &c)
{
    tacl_codec_params_t p;
    codec_of(c, &p);
}

bool codec_summable(const CodecArgs &c)
{
    tacl_codec_params_t p;
    return (codec_of(c, &p)->flags & TACL_CODEC_SUMMABLE) != 0;
}

static tacl_comp_scheme_t scheme_of(tacl_comm_t comm,
                                    const tacl_codec_t *codec,
                                    const tacl_codec_params_t *params,
                                    size_t count, bool rs,
                                    const std::string &scheme)
{
    for (int i = 0; i < TACL_NUM_COMP_SCHEMES; i++) {
        auto s = static_cast<tacl_comp_scheme_t>(i);
        if (scheme == tacl_comp_scheme_name(s))
            return s;
    }
    TORCH_CHECK_VALUE(scheme == "auto", "tacl: scheme '", scheme,
                      "' is not one of auto, gather, shuffle, sum, qgz");
    tacl_comp_scheme_t best = TACL_COMP_GATHER;
    double best_s = std::numeric_limits<double>::infinity();
    for (int i = 0; i < TACL_NUM_COMP_SCHEMES; i++) {
        auto s = static_cast<tacl_comp_scheme_t>(i);
        if (s == TACL_COMP_SUM && !(codec->flags & TACL_CODEC_SUMMABLE))
            continue;
        /* qgz keeps no residual: asked by name only. */
        if (s == TACL_COMP_QUANT_A2A)
            continue;
        tacl_sim_info_t info;
        tacl_status_t st = tacl_comp_estimate(comm,
                                              rs ? TACL_COLL_REDUCE_SCATTER
                                                 : TACL_COLL_ALLREDUCE,
                                              count, codec, params, s, &info);
        if (st != TACL_OK)
            comp_fail("tacl_comp_estimate", comm, st);
        /* Strictly lower: ties keep the earlier scheme on every rank. */
        if (info.seconds < best_s) {
            best_s = info.seconds;
            best = s;
        }
    }
    return best;
}

std::string comp_scheme(tacl_comm_t comm, const CodecArgs &c, size_t count,
                        bool coll_reduce_scatter, const std::string &scheme)
{
    tacl_codec_params_t p;
    const tacl_codec_t *codec = codec_of(c, &p);
    return tacl_comp_scheme_name(
        scheme_of(comm, codec, &p, count, coll_reduce_scatter, scheme));
}

/* A float32 CPU contiguous tensor, or a ValueError naming it. */
static void check_buffer(const at::Tensor &t, const char *name)
{
    TORCH_CHECK_VALUE(t.defined(), "tacl: ", name, " is undefined");
    TORCH_CHECK_VALUE(t.scalar_type() == at::kFloat, "tacl: ", name,
                      " must be float32, got ", t.scalar_type());
    TORCH_CHECK_VALUE(t.device().is_cpu(), "tacl: ", name,
                      " must be a CPU tensor, got ", t.device().str());
    TORCH_CHECK_VALUE(t.is_contiguous() && !t.is_sparse(), "tacl: ", name,
                      " must be a dense contiguous tensor");
}

/* The residual: none, or as many float32 values as the input. */
static float *residual_of(const std::optional<at::Tensor> &err, int64_t n)
{
    if (!err.has_value() || !err->defined())
        return nullptr;
    check_buffer(*err, "error_feedback");
    TORCH_CHECK_VALUE(err->numel() == n, "tacl: error_feedback has ",
                      err->numel(), " elements, the input ", n);
    return err->data_ptr<float>();
}

/* "all" or "inter", else ValueError naming it. */
static tacl_comp_hops_t hops_of(const std::string &hops)
{
    TORCH_CHECK_VALUE(hops == "all" || hops == "inter", "tacl: hops '", hops,
                      "' is not one of all, inter");
    return hops == "all" ? TACL_COMP_HOPS_ALL : TACL_COMP_HOPS_INTER;
}

void comp_all_reduce(tacl_comm_t comm, at::Tensor &tensor, const CodecArgs &c,
                     const std::optional<at::Tensor> &err,
                     const std::string &scheme, const std::string &hops,
                     tacl_request_t *req)
{
    check_buffer(tensor, "tensor");
    float *e = residual_of(err, tensor.numel());
    tacl_comp_hops_t h = hops_of(hops);
    tacl_codec_params_t p;
    const tacl_codec_t *codec = codec_of(c, &p);
    size_t n = static_cast<size_t>(tensor.numel());
    tacl_comp_scheme_t s = scheme_of(comm, codec, &p, n, false, scheme);
    float *buf = tensor.data_ptr<float>();
    /* The _nb form copies p now; the buffers stay with the caller's
     * work until the request completes. */
    tacl_status_t st =
        req == nullptr
            ? tacl_comp_allreduce_hops(buf, buf, n, codec, &p, e, s, h, comm)
            : tacl_comp_allreduce_hops_nb(buf, buf, n, codec, &p, e, s, h,
                                          comm, req);
    if (st != TACL_OK)
        comp_fail("compressed_all_reduce", comm, st);
}

void comp_reduce_scatter(tacl_comm_t comm, at::Tensor &output,
                         const at::Tensor &input, const CodecArgs &c,
                         const std::optional<at::Tensor> &err,
                         const std::string &scheme, const std::string &hops,
                         tacl_request_t *req)
{
    tacl_comp_hops_t h = hops_of(hops);
    check_buffer(output, "output");
    check_buffer(input, "input");
    int size = 0;
    tacl_status_t st = tacl_comm_size(comm, &size);
    if (st != TACL_OK)
        comp_fail("tacl_comm_size", comm, st);
    TORCH_CHECK_VALUE(input.numel() == output.numel() * size,
                      "tacl: compressed_reduce_scatter: input has ",
                      input.numel(), " elements, not ", size, " x ",
                      output.numel(), " (output)");
    TORCH_CHECK_VALUE(input.data_ptr() != output.data_ptr() ||
                          input.numel() == 0,
                      "tacl: compressed_reduce_scatter: output and input "
                      "are the same memory");
    float *e = residual_of(err, input.numel());
    tacl_codec_params_t p;
    const tacl_codec_t *codec = codec_of(c, &p);
    size_t n = static_cast<size_t>(output.numel());
    tacl_comp_scheme_t s = scheme_of(comm, codec, &p, n, true, scheme);
    st = req == nullptr
             ? tacl_comp_reduce_scatter_hops(input.data_ptr<float>(),
                                             output.data_ptr<float>(), n,
                                             codec, &p, e, s, h, comm)
             : tacl_comp_reduce_scatter_hops_nb(input.data_ptr<float>(),
                                                output.data_ptr<float>(), n,
                                                codec, &p, e, s, h, comm,
                                                req);
    if (st != TACL_OK)
        comp_fail("compressed_reduce_scatter", comm, st);
}

} // namespace tacl_torch
