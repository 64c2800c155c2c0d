#include "model/dit/dit_inputs.h"

#include <cmath>

namespace h3::model {

namespace {

Result<Tensor> squeeze_batch(const std::string& name, Tensor t, int want_rank) {
    if (t.rank() == want_rank + 1 && t.dim(0) == 1) {
        std::vector<int64_t> s = t.shape().to_vector();
        s.erase(s.begin());
        H3_ASSIGN_OR_RETURN(t, t.contiguous());
        return t.view(Shape(s));
    }
    if (t.rank() != want_rank)
        return invalid_argument("input '" + name + "' must have rank " + std::to_string(want_rank) +
                                " (optionally with a batch dim of 1), got " + t.describe());
    return t;
}

std::vector<int64_t> as_ints(const Tensor& t) {
    auto c = t.contiguous();
    std::vector<int64_t> v(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(load_as_f64(c->data(), t.dtype(), i));
    return v;
}

Status check_int(const char* name, const Tensor& t) {
    if (t.dtype() != DType::kI64 && t.dtype() != DType::kI32)
        return invalid_argument(std::string("input '") + name + "' must be i64 or i32, got " + t.describe());
    return ok_status();
}

Status check_float(const char* name, const Tensor& t) {
    if (!dtype_is_float(t.dtype()))
        return invalid_argument(std::string("input '") + name + "' must be a float tensor, got " +
                                t.describe());
    return ok_status();
}

} // namespace

Result<DitInputs> DitInputs::from_file(const std::string& path) {
    H3_ASSIGN_OR_RETURN(auto f, io::SafetensorsFile::open(path));
    DitInputs in;
    struct Field {
        const char* name;
        Tensor* slot;
        int rank;
    };
    Field fields[] = {{"hidden_states", &in.hidden_states, 2},
                      {"audio_hidden_states", &in.audio_hidden_states, 2},
                      {"encoder_hidden_states", &in.encoder_hidden_states, 2},
                      {"timestep", &in.timestep, 1},
                      {"timestep_indices", &in.timestep_indices, 1},
                      {"token_tags", &in.token_tags, 1},
                      {"position_ids", &in.position_ids, 2},
                      {"video_indices", &in.video_indices, 1},
                      {"audio_indices", &in.audio_indices, 1},
                      {"text_indices", &in.text_indices, 1}};
    for (auto& fd : fields) {
        if (!f.contains(fd.name)) return bad_input("inputs file " + path + " lacks tensor '" + fd.name + "'");
        H3_ASSIGN_OR_RETURN(Tensor t, f.tensor(fd.name));
        H3_ASSIGN_OR_RETURN(Tensor own, t.to(Device::cpu())); // detach from the mmap
        auto sq = squeeze_batch(fd.name, own, fd.rank);
        if (!sq.ok()) return sq.status().with_context("inputs file " + path);
        *fd.slot = std::move(sq).value();
    }
    return in;
}

Status DitInputs::validate(const DitConfig& c) const {
    H3_TRY(check_float("hidden_states", hidden_states));
    H3_TRY(check_float("audio_hidden_states", audio_hidden_states));
    H3_TRY(check_float("encoder_hidden_states", encoder_hidden_states));
    H3_TRY(check_float("timestep", timestep));
    H3_TRY(check_float("position_ids", position_ids));
    for (auto [n, t] : {std::pair{"timestep_indices", &timestep_indices},
                        std::pair{"token_tags", &token_tags}, std::pair{"video_indices", &video_indices},
                        std::pair{"audio_indices", &audio_indices}, std::pair{"text_indices", &text_indices}})
        H3_TRY(check_int(n, *t));
    if (hidden_states.dim(1) != c.video_patch_dim())
        return invalid_argument("input 'hidden_states' has " + std::to_string(hidden_states.dim(1)) +
                                " columns, the config's patch vector is " +
                                std::to_string(c.video_patch_dim()));
    if (audio_hidden_states.dim(1) != c.audio_in_channels)
        return invalid_argument(
            "input 'audio_hidden_states' has " + std::to_string(audio_hidden_states.dim(1)) +
            " columns, expected audio_in_channels = " + std::to_string(c.audio_in_channels));
    if (encoder_hidden_states.dim(1) != c.text_dim)
        return invalid_argument("input 'encoder_hidden_states' has " +
                                std::to_string(encoder_hidden_states.dim(1)) +
                                " columns, expected text_dim = " + std::to_string(c.text_dim));
    const int64_t S = timestep_indices.dim(0);
    if (token_tags.dim(0) != S || position_ids.dim(0) != S || position_ids.dim(1) != 3)
        return invalid_argument("inputs disagree on the packed length: timestep_indices has " +
                                std::to_string(S) + " rows, token_tags " + token_tags.shape().to_string() +
                                ", position_ids " + position_ids.shape().to_string() +
                                " (expected [S] and [S, 3])");
    if (video_indices.dim(0) != hidden_states.dim(0))
        return invalid_argument("input 'video_indices' has " + std::to_string(video_indices.dim(0)) +
                                " entries for " + std::to_string(hidden_states.dim(0)) +
                                " hidden_states rows");
    if (audio_indices.dim(0) != audio_hidden_states.dim(0))
        return invalid_argument("input 'audio_indices' has " + std::to_string(audio_indices.dim(0)) +
                                " entries for " + std::to_string(audio_hidden_states.dim(0)) +
                                " audio_hidden_states rows");
    if (text_indices.dim(0) != encoder_hidden_states.dim(0))
        return invalid_argument("input 'text_indices' has " + std::to_string(text_indices.dim(0)) +
                                " entries for " + std::to_string(encoder_hidden_states.dim(0)) +
                                " encoder_hidden_states rows");
    const int64_t M = timestep.dim(0);
    if (M < 1) return invalid_argument("input 'timestep' is empty");
    for (int64_t v : as_ints(timestep_indices))
        if (v < 0 || v >= M)
            return invalid_argument("input 'timestep_indices' holds " + std::to_string(v) + ", outside [0, " +
                                    std::to_string(M) + ")");
    for (int64_t v : as_ints(token_tags))
        if (v < 0 || v > 2)
            return invalid_argument("input 'token_tags' holds " + std::to_string(v) +
                                    "; tags are 0 (video), 1 (text), 2 (audio)");
    std::vector<uint8_t> covered(static_cast<size_t>(S), 0);
    for (auto [n, t] : {std::pair{"text_indices", &text_indices}, std::pair{"video_indices", &video_indices},
                        std::pair{"audio_indices", &audio_indices}})
        for (int64_t v : as_ints(*t)) {
            if (v < 0 || v >= S)
                return invalid_argument(std::string("input '") + n + "' holds row " + std::to_string(v) +
                                        ", outside the packed sequence [0, " + std::to_string(S) + ")");
            if (covered[static_cast<size_t>(v)]++)
                return invalid_argument(std::string("input '") + n + "' names row " + std::to_string(v) +
                                        ", which another index already covers");
        }
    for (int64_t r = 0; r < S; ++r)
        if (!covered[static_cast<size_t>(r)])
            return invalid_argument("packed row " + std::to_string(r) +
                                    " is covered by none of text_indices, video_indices, audio_indices");
    auto ts = to_f32_vector(timestep);
    for (float t : *ts)
        if (!std::isfinite(t)) return invalid_argument("input 'timestep' holds a non-finite value");
    return ok_status();
}

Result<DitPackedInputs> pack_inputs(const DitInputs& in, const DitConfig& c) {
    H3_TRY(in.validate(c));
    DitPackedInputs p;
    p.rows = in.rows();
    auto to32 = [](const Tensor& t) {
        std::vector<int32_t> v;
        for (int64_t x : as_ints(t)) v.push_back(static_cast<int32_t>(x));
        return v;
    };
    p.timestep_indices = to32(in.timestep_indices);
    p.token_tags = to32(in.token_tags);
    p.video_indices = to32(in.video_indices);
    p.audio_indices = to32(in.audio_indices);
    p.text_indices = to32(in.text_indices);
    auto pos = in.position_ids.contiguous();
    p.positions.resize(static_cast<size_t>(pos->numel()));
    for (size_t i = 0; i < p.positions.size(); ++i)
        p.positions[i] = load_as_f64(pos->data(), pos->dtype(), i);
    H3_ASSIGN_OR_RETURN(p.timesteps, to_f32_vector(in.timestep));
    H3_ASSIGN_OR_RETURN(p.video, in.hidden_states.to_dtype(DType::kF32));
    H3_ASSIGN_OR_RETURN(p.audio, in.audio_hidden_states.to_dtype(DType::kF32));
    H3_ASSIGN_OR_RETURN(p.text, in.encoder_hidden_states.to_dtype(DType::kF32));
    return p;
}

} // namespace h3::model
