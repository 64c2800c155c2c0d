// The launcher convention (issue #17): a process started by torchrun, a Slurm/mpirun wrapper or by hand with
// RANK, WORLD_SIZE (both, or neither), LOCAL_RANK (default RANK), MASTER_ADDR (default 127.0.0.1) and
// MASTER_PORT (default 29500) is one rank of a device group. H3_MASTER_PORT, when set, is the port rank 0
// listens on instead of MASTER_PORT; under torchrun (TORCHELASTIC_USE_AGENT_STORE=True, whose agent listens
// on MASTER_PORT itself) it defaults to MASTER_PORT + 1. Rank 0 listens on MASTER_ADDR:MASTER_PORT; the
// bootstrap hands its NCCL unique id to the others (CUDA), or carries the CPU communicator itself (a star
// through rank 0, ops::make_tcp_communicator). Every process runs the whole job; rank 0 writes the outputs.
#pragma once

#include "core/status.h"
#include "runtime/placement.h"

#include <optional>

namespace h3::runtime {

// nullopt when RANK and WORLD_SIZE are unset; errors name the variable.
Result<std::optional<ProcessRank>> process_rank_from_env();

} // namespace h3::runtime
