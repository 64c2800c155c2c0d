// The benchmarks of `h3-bench` (and of `h3-engine bench`, which runs it): one factory per bench, each in its
// own file (bench/<name>.cpp or bench/<name>/).
#pragma once

#include "bench/cli_support.h"

namespace h3::bench {

Command dit_command();       // dit/command.cpp: DiT blocks and forwards with random full-width weights
Command vae_command();       // vae/command.cpp: the video and audio VAE decoders (and encoders)
Command text_command();      // text.cpp: the conditioner's language stack
Command attention_command(); // attention.cpp: every attention implementation on one shape
Command fp8_command();       // fp8.cpp: fp8 against bf16 after one full-width forward
Command generate_command();  // generate.cpp: the sampling loop on a random full-width DiT
Command request_command();   // request.cpp: one whole t2va request through h3::Engine
Command quality_command();   // quality/command.cpp: the quality cost of every acceleration setting
Command load_command();      // load.cpp: cold start, a fresh process from open to the first DiT forward

// h3-bench: every bench above, in this order.
cli::AppSpec bench_app();

} // namespace h3::bench
