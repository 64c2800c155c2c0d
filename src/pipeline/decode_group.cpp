#include "pipeline/decode_group.h"

#include "pipeline/decode.h"

#include <optional>
#include <vector>

namespace h3::pipeline {

Result<Tensor> decode_video_on_group(runtime::DeviceGroup& group, const model::VideoVae& vae,
                                     const Tensor& latents, const std::atomic<bool>* cancel,
                                     std::function<void(int clips_done, int clips)> on_clip,
                                     std::function<Status(Tensor)> frames_sink) {
    std::vector<Tensor> frames(static_cast<size_t>(group.size()));
    int holder = -1; // the local index of rank 0, when this process has it
    H3_TRY(group.run_spmd([&](runtime::DeviceGroup::Rank& rank) -> Status {
        const model::VideoVae* mine = &vae;
        std::optional<model::VideoVae> replica; // the same weights, its own per-shape tables and buffers
        if (rank.local != 0) {
            replica = vae;
            replica->tables.reset();
            mine = &*replica;
        }
        model::VideoDecodeOptions o;
        o.cancel = cancel;
        o.group = rank.world.get();
        if (rank.rank == 0) { // rank 0 assembles
            o.on_clip = on_clip;
            o.frames_sink = frames_sink;
        }
        H3_ASSIGN_OR_RETURN(frames[static_cast<size_t>(rank.local)],
                            decode_video_frames(rank.ctx, *mine, latents, o));
        if (rank.rank == 0) holder = rank.local;
        return ok_status();
    }));
    if (holder < 0) return Tensor();
    return frames[static_cast<size_t>(holder)];
}

} // namespace h3::pipeline
