// `h3-bench vae`'s options (vae/command.cpp defines their flags) and its three measurements: the decoders
// (decode.cpp), the keyframe encoder (encode.cpp) and the ref2va reference encoders (reference.cpp), all with
// random weights generated on the device.
#pragma once

#include "bench/cli_support.h"
#include "bench/roofline.h"
#include "bench/synthetic_layout.h"
#include "model/video_vae/video_vae.h"

#include <string>

namespace h3::bench {

struct VaeBenchOptions {
    std::string config = "official", size = release_size(), device = "cuda", dtype = "f16";
    // exact (--dtype blocks) | bf16 (bf16 blocks, --dtype ignored) | fp8 (e4m3 block GEMMs over bf16 blocks)
    std::string vae_precision = "exact";
    int frames = kReleaseFrames, tiles = 0, tile_batch = 0;
    bool random_weights = false, json = false, encode = false, reference = false, exact_fp32 = false;
    bool assemble_on_host = false;
    bool sample = false; // time the fp32 sample's decode and download instead of the request's RGB8 frames
    bool stream = false; // the RGB8 frames to a sink clip by clip (a request's MP4 path) instead of whole
    // after the timed decode, the same latents through the exact decoder (the same random weights in its
    // block dtype): the frames' PSNR against it (bf16 and fp8 only; not with --tiles, --sample, --stream)
    bool psnr_vs_exact = false;
    // the roofline the decode is measured against (bench/roofline.h): dense f16 tensor rate (e4m3 at twice
    // it) and HBM bandwidth
    double peak_tflops = kH100DenseF16Tflops, hbm_tb_per_s = kH100HbmTbPerS;
};

// The VAE config the benches use (the official one with unit latent normalization, or --config FILE) and
// the --size canvas checked against its patch size.
Status vae_bench_setup(const VaeBenchOptions& o, model::VideoVaeConfig& vc, int& W, int& H);

// Each returns an ExitCode (errors reported).
int run_vae_decode_bench(const VaeBenchOptions& o);
int run_vae_encode_bench(const VaeBenchOptions& o);
int run_vae_reference_bench(const VaeBenchOptions& o);

} // namespace h3::bench
