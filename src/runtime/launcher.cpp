#include "runtime/launcher.h"

#include <cstdlib>
#include <string>

namespace h3::runtime {

namespace {

Result<std::optional<int>> env_int(const char* name, int lo, int hi) {
    const char* v = std::getenv(name);
    if (!v) return std::optional<int>{};
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi)
        return invalid_argument(std::string(name) + "='" + v + "' must be an integer in [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return std::optional<int>{static_cast<int>(x)};
}

} // namespace

Result<std::optional<ProcessRank>> process_rank_from_env() {
    H3_ASSIGN_OR_RETURN(auto rank, env_int("RANK", 0, 1 << 20));
    H3_ASSIGN_OR_RETURN(auto world, env_int("WORLD_SIZE", 1, 1 << 20));
    if (!rank && !world) return std::optional<ProcessRank>{};
    if (!rank || !world)
        return invalid_argument("RANK and WORLD_SIZE must be set together (the launcher convention)");
    if (*rank >= *world)
        return invalid_argument("RANK " + std::to_string(*rank) + " must be below WORLD_SIZE " +
                                std::to_string(*world));
    ProcessRank p;
    p.rank = *rank;
    p.world = *world;
    H3_ASSIGN_OR_RETURN(auto local, env_int("LOCAL_RANK", 0, 1 << 20));
    p.local_rank = local.value_or(*rank);
    if (const char* a = std::getenv("MASTER_ADDR"); a && *a) p.master_addr = a;
    H3_ASSIGN_OR_RETURN(auto port, env_int("MASTER_PORT", 1, 65535));
    if (port) p.master_port = *port;
    // torchrun's agent keeps its own TCPStore listening on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True:
    // its workers' PyTorch connects there as a client), so rank 0 cannot listen there: H3_MASTER_PORT when
    // set, else the port after it.
    H3_ASSIGN_OR_RETURN(auto own, env_int("H3_MASTER_PORT", 1, 65535));
    const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (own)
        p.master_port = *own;
    else if (agent_store && std::string(agent_store) == "True")
        p.master_port = p.master_port < 65535 ? p.master_port + 1 : p.master_port - 1;
    return std::optional<ProcessRank>{p};
}

} // namespace h3::runtime
