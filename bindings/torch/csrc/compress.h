/*
 * Compressed collectives for the torch binding: tacl_comp_allreduce(_hops)
 * and tacl_comp_reduce_scatter on float32 CPU tensors, a codec named by
 * the caller and its parameters.  The Python side (tacl_torch/compress.py)
 * stages other dtypes and devices; these functions take what tacl takes
 * and name the argument of anything else.
 */
#pragma once

#include <cstdint>
#include <string>

#include <ATen/ATen.h>
#include <optional>

extern "C" {
#include <tacl.h>
}

namespace tacl_torch {

/* tacl's own message for a failed call on comm (backend.cpp). */
std::string tacl_message(tacl_comm_t comm, tacl_status_t s);

/* A codec by name and the parameters the caller gave it. */
struct CodecArgs {
    std::string name;
    double density = 0.0;
    int bits = 0;
    int64_t block = 0;
    uint64_t seed = 0;
};

/* Raise ValueError, naming the codec or the parameter, when the codec
 * does not exist or its parameters do not suit it. */
void codec_check(const CodecArgs &c);

/* Whether the codec's encodings add up as they are (TACL_CODEC_SUMMABLE). */
bool codec_summable(const CodecArgs &c);

/*
 * The scheme a compressed call runs: "gather", "shuffle" or "sum" as
 * given, or for "auto" the one tacl_comp_estimate prices lowest among
 * those the codec takes (the same on every rank: the estimate is a pure
 * function of the communicator's topology).  coll_reduce_scatter picks
 * the reduce-scatter's estimate, else the all-reduce's.
 */
std::string comp_scheme(tacl_comm_t comm, const CodecArgs &c, size_t count,
                        bool coll_reduce_scatter, const std::string &scheme);

/* tensor (float32, CPU, contiguous) becomes the sum over ranks of the
 * decoded inputs; err is the caller's residual or none; hops "all" or
 * "inter".  Without the GIL; blocking where req is null, else the _nb
 * form's request in *req (tensor and err held by the caller until it
 * completes). */
void comp_all_reduce(tacl_comm_t comm, at::Tensor &tensor, const CodecArgs &c,
                     const std::optional<at::Tensor> &err,
                     const std::string &scheme, const std::string &hops,
                     tacl_request_t *req);

/* output (n values) gets block rank of the sum over ranks of input
 * (size x n values), each travelling encoded on the hops named ("all",
 * or "inter": tacl_comp_reduce_scatter_hops); req as comp_all_reduce. */
void comp_reduce_scatter(tacl_comm_t comm, at::Tensor &output,
                         const at::Tensor &input, const CodecArgs &c,
                         const std::optional<at::Tensor> &err,
                         const std::string &scheme, const std::string &hops,
                         tacl_request_t *req);

} // namespace tacl_torch
